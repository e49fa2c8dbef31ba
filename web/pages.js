/*
 * pages.js: the silos, calculators and estimator-run pages of the dashboard (docs/DASHBOARD.md says
 * what each shows and which endpoint it reads). Built on the DP core of app.js (contract there).
 */
'use strict';

(function () {
    const h = DP.h;

    /* ---- silos -------------------------------------------------------------------------------- */

    /* The unit a silo's budget is kept in: 'epsilon' ((ε, δ) caps), 'rho' (zCDP caps) or null (a
     * silo that opted out of DP: spends are recorded, never refused). */
    function unitOf(s) {
        if (s.budget && typeof s.budget.epsilon === 'number')
            return 'epsilon';
        if (s.budget && typeof s.budget.rho === 'number')
            return 'rho';
        return null;
    }
    const SYMBOL = {epsilon: 'ε', rho: 'ρ'};

    /* The four figures of a silo in its unit: spent and reserved rounded up, remaining down. */
    function figures(s) {
        const u = unitOf(s);
        if (!u)
            return null;
        const num = (o) => (o && typeof o[u] === 'number' ? o[u] : null);
        return {unit: u, budget: s.budget[u], spent: num(s.spent), reserved: num(s.reserved),
                remaining: num(s.remaining)};
    }

    function budgetBars(s) {
        const f = figures(s);
        if (!f)
            return h('p', {class: 'note'}, 'Opted out of differential privacy: spends are recorded, never refused.');
        const sym = SYMBOL[f.unit];
        const row = (name, v, fmt) =>
            h('div', {class: 'bar-row', 'data-figure': name},
              h('span', {class: 'bar-name'}, name),
              DP.meter(v === null ? 0 : v, f.budget, sym + ' ' + (v === null ? '∞' : fmt(v)) + ' of ' +
                       DP.fmtEps(f.budget)));
        return h('div', {class: 'bars ' + 'unit-' + f.unit},
                 h('div', {class: 'bar-row', 'data-figure': 'budget'},
                   h('span', {class: 'bar-name'}, 'budget'),
                   h('span', null, h('span', {class: 'figure'}, sym + ' ' + DP.fmtEps(f.budget)),
                     s.budget.delta !== undefined ? h('span', {class: 'note'}, ' at δ = ' + s.budget.delta) : null)),
                 row('spent', f.spent, DP.fmtEps),
                 row('reserved', f.reserved, DP.fmtEps),
                 row('remaining', f.remaining, DP.fmtEpsDown));
    }

    function accountantOf(s) {
        const a = s.accounting || {};
        return a.accountant + (a.conversion ? ' (' + a.conversion + ')' : '');
    }

    DP.route('#/silos', async (params, main, query) => {
        main.appendChild(h('h1', null, 'Silos'));
        const archived = query.archived === 'true';
        main.appendChild(h('p', null, archived ? h('a', {href: '#/silos'}, 'Show active silos')
                                               : h('a', {href: '#/silos?archived=true'}, 'Show archived silos too')));
        const list = await DP.pageAll('/v1/silos' + (archived ? '?archived=true' : ''), 'silos');
        if (!DP.alive(main))
            return;
        if (list.answer) {
            DP.error(main, list.answer);
            return;
        }
        if (!list.items.length) {
            main.appendChild(h('p', null, 'No silos yet. Create one with POST /v1/silos (docs/BUDGETS.md).'));
            return;
        }
        const ul = h('ul', {class: 'silos'});
        for (const s of list.items) {
            ul.appendChild(h('li', {class: 'silo card', 'data-silo': s.id},
                h('h2', null, h('a', {href: '#/silos/' + s.id}, s.name), ' ',
                  h('span', {class: 'note'}, '#' + s.id), s.archived ? h('span', {class: 'tag'}, 'archived') : null),
                h('p', {class: 'accountant'}, 'accountant: ', h('span', {'data-accountant': ''}, accountantOf(s)),
                  ' · ', String(s.n_charges), s.n_charges === 1 ? ' charge' : ' charges',
                  s.reserved && s.reserved.active_claims ? ' · ' + s.reserved.active_claims + ' open claim' +
                      (s.reserved.active_claims === 1 ? '' : 's') : null),
                budgetBars(s)));
        }
        main.appendChild(ul);
    });

    /* Exposed for the silo page (below) and the tests' reading of the rounding rules. */
    DP.silo = {unitOf, figures, budgetBars, accountantOf};
})();
