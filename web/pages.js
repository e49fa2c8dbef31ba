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

    /* ---- a silo's page ------------------------------------------------------------------------ */

    const secs = (iso) => Date.parse(iso) / 1000;
    /* '2026-11-27T11:10:26.106Z' -> the value of a datetime-local input (local time, seconds). */
    function toLocalInput(iso) {
        const d = new Date(iso);
        if (isNaN(d))
            return '';
        const p = (n) => String(n).padStart(2, '0');
        return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:` +
               `${p(d.getMinutes())}:${p(d.getSeconds())}`;
    }
    function hashWith(base, q) {
        const u = new URLSearchParams();
        for (const [k, v] of Object.entries(q))
            if (v !== undefined && v !== null && v !== '')
                u.set(k, v);
        const s = u.toString();
        return base + (s ? '?' + s : '');
    }

    /* ε (or ρ) spent over time: one step per charge, from the silo's creation, with the budget. */
    function spendChart(box, s, charges) {
        const u = unitOf(s);
        const sym = SYMBOL[u];
        const xs = [secs(s.created_at)], ys = [0], cap = [s.budget[u]];
        for (const c of charges) {
            const v = c.cumulative_after ? c.cumulative_after[u] : null;
            xs.push(secs(c.time));
            ys.push(typeof v === 'number' ? v : null);
            cap.push(s.budget[u]);
        }
        const title = `${sym} spent by silo ${s.name} over time, one step per charge (${charges.length}), ` +
                      `against its budget ${sym} = ${DP.fmtEps(s.budget[u])}`;
        return DP.chart(box, {
            title,
            scales: {x: {time: true}, y: {range: (_, lo, hi) => [0, Math.max(hi, s.budget[u]) * 1.05]}},
            series: [{},
                     {label: `${sym} spent`, stroke: '#0b5cad', width: 2, paths: uPlot.paths.stepped({align: 1}),
                      value: (_, v) => (v === null ? '–' : DP.fmtEps(v))},
                     {label: 'budget', stroke: '#a40e26', dash: [6, 4], width: 1.5, points: {show: false},
                      value: (_, v) => (v === null ? '–' : DP.fmtEps(v))}],
            axes: [{}, {label: sym}],
        }, [xs, ys, cap]);
    }

    function chargesTable(s, charges) {
        const u = unitOf(s);
        const sym = u ? SYMBOL[u] : 'ε';
        const col = (c, key) => (c && typeof c[u || 'epsilon'] === 'number' ? DP.fmtEps(c[u || 'epsilon']) : '∞');
        return h('table', {class: 'charges'},
            h('caption', {class: 'note'}, 'The audit log: each charge, its cost, and the silo\'s total after it.'),
            h('thead', null, h('tr', null,
                h('th', {scope: 'col', class: 'num'}, 'id'), h('th', {scope: 'col'}, 'time'),
                h('th', {scope: 'col', class: 'num'}, 'job'), h('th', {scope: 'col'}, 'reason'),
                h('th', {scope: 'col'}, 'event'), h('th', {scope: 'col', class: 'num'}, 'cost ' + sym),
                h('th', {scope: 'col', class: 'num'}, sym + ' after'))),
            h('tbody', null, charges.map((c) => h('tr', {'data-charge': c.id},
                h('td', {class: 'num'}, String(c.id)),
                h('td', null, h('time', {datetime: c.time}, DP.fmtTime(c.time))),
                h('td', {class: 'num'}, c.job_id === null ? '–' : h('a', {href: '#/jobs/' + c.job_id}, String(c.job_id))),
                h('td', null, c.reason || (c.claim_id ? 'claim ' + c.claim_id : '–')),
                h('td', null, h('code', null, eventSummary(c.event))),
                h('td', {class: 'num', 'data-cost': ''}, col(c.cost)),
                h('td', {class: 'num', 'data-after': ''}, col(c.cumulative_after))))));
    }

    /* A one-line reading of an event tree: 'self_composed 400 × poisson_sampled q=0.01 × gaussian σ=1.1'. */
    function eventSummary(e) {
        if (!e || typeof e !== 'object')
            return String(e);
        const parts = [];
        for (let k = 0; e && k < 6; k++) {
            let p = e.type;
            if (e.count !== undefined)
                p += ' ' + e.count;
            if (e.sampling_rate !== undefined)
                p += ' q=' + e.sampling_rate;
            if (e.noise_multiplier !== undefined)
                p += ' σ=' + e.noise_multiplier;
            if (e.epsilon !== undefined)
                p += ' ε=' + e.epsilon;
            if (e.rho !== undefined)
                p += ' ρ=' + e.rho;
            if (Array.isArray(e.events)) {
                p += ' of ' + e.events.length;
                e = null;
            } else {
                e = e.event;
            }
            parts.push(p);
        }
        return parts.join(' × ');
    }

    async function claimsSection(box, s) {
        box.appendChild(h('h2', null, 'Open claims'));
        const u = unitOf(s);
        const reserved = s.reserved || {};
        const summary = h('p', {'data-reserved': ''}, `${reserved.active_claims || 0} open claim` +
            (reserved.active_claims === 1 ? '' : 's') +
            (u && typeof reserved[u] === 'number' ? `, reserving ${SYMBOL[u]} ${DP.fmtEps(reserved[u])}` : ''),
            ' (what the API reports for the silo).');
        box.appendChild(summary);
        if (!(await DP.operation('get', '/v1/silos/{id}/claims'))) {
            box.appendChild(h('p', {class: 'note'}, 'This daemon has no list of a silo\'s claims ' +
                '(GET /v1/silos/{id}/claims); the reserved figure above is their sum.'));
            return;
        }
        /* The route's first page, its query parameters left at their defaults (the document is
         * the judge of which exist); claims that are no longer active are left out here. */
        const a = await DP.api('GET', `/v1/silos/${s.id}/claims`);
        if (a.status !== 200 || !a.body || !Array.isArray(a.body.claims)) {
            DP.error(box, a);
            return;
        }
        const list = {items: a.body.claims.filter((c) => !c.state || c.state === 'active')};
        if (a.body.next_after !== null && a.body.next_after !== undefined)
            box.appendChild(h('p', {class: 'note'}, 'More claims than this page shows: see ' +
                              `GET /v1/silos/${s.id}/claims?after=${a.body.next_after}.`));
        if (!list.items.length) {
            box.appendChild(h('p', null, 'No open claims.'));
            return;
        }
        box.appendChild(h('table', {class: 'claims'},
            h('thead', null, h('tr', null, h('th', {scope: 'col', class: 'num'}, 'id'),
                h('th', {scope: 'col'}, 'created'), h('th', {scope: 'col'}, 'expires'),
                h('th', {scope: 'col', class: 'num'}, 'job'),
                h('th', {scope: 'col', class: 'num'}, 'cost ' + (u ? SYMBOL[u] : 'ε')))),
            h('tbody', null, list.items.map((c) => h('tr', {'data-claim': c.id},
                h('td', {class: 'num'}, String(c.id)), h('td', null, DP.fmtTime(c.created_at)),
                h('td', null, DP.fmtTime(c.expires_at)),
                h('td', {class: 'num'}, c.job_id ? h('a', {href: '#/jobs/' + c.job_id}, String(c.job_id)) : '–'),
                h('td', {class: 'num'}, c.cost && typeof c.cost[u || 'epsilon'] === 'number'
                    ? DP.fmtEps(c.cost[u || 'epsilon']) : '∞'))))));
    }

    DP.route('#/silos/:id', async (params, main, query) => {
        const id = params.id;
        const a = await DP.api('GET', '/v1/silos/' + encodeURIComponent(id));
        if (!DP.alive(main))
            return;
        main.appendChild(h('p', null, h('a', {href: '#/silos'}, '← all silos')));
        if (a.status !== 200) {
            main.appendChild(h('h1', null, 'Silo ' + id));
            DP.error(main, a);
            return;
        }
        const s = a.body;
        main.appendChild(h('h1', null, 'Silo ', h('span', {'data-name': ''}, s.name), ' ',
                           h('span', {class: 'note'}, '#' + s.id), s.archived ? h('span', {class: 'tag'}, 'archived') : null));
        main.appendChild(h('div', {class: 'card'},
            h('p', {class: 'accountant'}, 'accountant: ', h('span', {'data-accountant': ''}, accountantOf(s)),
              ' · created ', DP.fmtTime(s.created_at), ' · ', String(s.n_charges),
              s.n_charges === 1 ? ' charge' : ' charges'),
            budgetBars(s),
            s.accounting && s.accounting.method ? h('p', {class: 'note'}, s.accounting.method) : null));

        /* The chart reads the whole log; the table below reads one page of it. */
        const chartBox = h('section', {'aria-labelledby': 'spend-h'}, h('h2', {id: 'spend-h'}, 'Spent over time'));
        main.appendChild(chartBox);
        const claimsBox = h('section', {class: 'claims-box'});
        const logBox = h('section', {'aria-labelledby': 'log-h'});
        main.appendChild(logBox);
        main.appendChild(claimsBox);

        const all = await DP.pageAll(`/v1/silos/${s.id}/charges`, 'charges');
        if (!DP.alive(main))
            return;
        if (all.answer)
            DP.error(chartBox, all.answer);
        else if (!unitOf(s))
            chartBox.appendChild(h('p', {class: 'note'}, 'No chart: this silo opted out of differential privacy.'));
        else if (!all.items.length)
            chartBox.appendChild(h('p', null, 'Nothing spent yet.'));
        else
            spendChart(chartBox.appendChild(h('div', {class: 'chart', id: 'spend-chart'})), s, all.items);

        /* The audit log: filters and the cursor live in the hash, so a page can be linked and the
         * browser's Back button returns to the previous page of the log. */
        const base = '#/silos/' + s.id;
        const filt = {job_id: query.job_id || '', since: query.since || '', until: query.until || ''};
        const limit = query.limit || '50';
        logBox.appendChild(h('h2', {id: 'log-h'}, 'Charges'));
        const jobIn = h('input', {name: 'job_id', type: 'number', min: '1', step: '1', value: filt.job_id, inputmode: 'numeric'});
        const sinceIn = h('input', {name: 'since', type: 'datetime-local', step: '1', value: toLocalInput(filt.since)});
        const untilIn = h('input', {name: 'until', type: 'datetime-local', step: '1', value: toLocalInput(filt.until)});
        const form = h('form', {class: 'inline', id: 'charge-filter', 'aria-label': 'Filter the charges'},
            DP.field('Job id', jobIn), DP.field('Since (local time)', sinceIn), DP.field('Until (local time)', untilIn),
            h('div', {class: 'field'}, h('button', {type: 'submit'}, 'Filter'),
              h('a', {href: base, class: 'reset'}, 'Clear filters')));
        const toIso = (v) => (v ? new Date(v).toISOString() : '');
        form.addEventListener('submit', (ev) => {
            ev.preventDefault();
            DP.go(hashWith(base, {job_id: jobIn.value.trim(), since: toIso(sinceIn.value), until: toIso(untilIn.value),
                                  limit: query.limit}));
        });
        logBox.appendChild(form);
        const q = new URLSearchParams({limit});
        for (const [k, v] of Object.entries(filt))
            if (v)
                q.set(k, v);
        if (query.after)
            q.set('after', query.after);
        const page = await DP.api('GET', `/v1/silos/${s.id}/charges?${q}`);
        if (!DP.alive(main))
            return;
        if (page.status !== 200) {
            if (!DP.fieldErrors(form, page))
                DP.error(logBox, page);
        } else {
            const cs = page.body.charges;
            logBox.appendChild(h('p', {class: 'note', 'aria-live': 'polite'},
                cs.length ? `Charges ${cs[0].id} to ${cs[cs.length - 1].id}` : 'No charges match.',
                query.after ? ` (after charge ${query.after})` : ''));
            if (cs.length)
                logBox.appendChild(chargesTable(s, cs));
            const nav = h('nav', {class: 'pager', 'aria-label': 'Pages of the charges'});
            if (query.after)
                nav.appendChild(h('a', {href: hashWith(base, Object.assign({}, filt, {limit: query.limit}))}, 'First page'));
            if (page.body.next_after !== null)
                nav.appendChild(h('a', {href: hashWith(base, Object.assign({}, filt, {limit: query.limit,
                                                                                      after: page.body.next_after})),
                                        rel: 'next'}, 'Next page'));
            logBox.appendChild(nav);
        }
        await claimsSection(claimsBox, s);
    });

    /* Exposed for the job pages and the tests. */
    DP.silo = {unitOf, figures, budgetBars, accountantOf, eventSummary};
})();
