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
            if (list.answer.status === 403) {
                /* A silo token may read its own silo, not the list (docs/BUDGETS.md "Access control"). */
                const idIn = h('input', {name: 'silo_id', type: 'number', min: '1', step: '1', inputmode: 'numeric'});
                const form = h('form', {class: 'inline', id: 'open-silo'},
                    DP.field('Your silo\'s id', idIn, 'only the admin token lists every silo; a silo token reads its own'),
                    h('div', {class: 'field'}, h('button', {type: 'submit'}, 'Open')));
                form.addEventListener('submit', (ev) => {
                    ev.preventDefault();
                    if (idIn.value.trim())
                        DP.go('#/silos/' + encodeURIComponent(idIn.value.trim()));
                });
                main.appendChild(form);
            }
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
        /* The route's first page; claims that are no longer active are left out here. */
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
        box.appendChild(h('p', {class: 'note'}, 'Each claim\'s cost on its own; the reserved figure ' +
            'above is what the claims together add to the silo\'s total under composition, which ' +
            'is less than the sum of their costs.'));
        box.appendChild(h('table', {class: 'claims'},
            h('thead', null, h('tr', null, h('th', {scope: 'col', class: 'num'}, 'id'),
                h('th', {scope: 'col'}, 'created'), h('th', {scope: 'col'}, 'expires'),
                h('th', {scope: 'col', class: 'num'}, 'job'),
                h('th', {scope: 'col', class: 'num'}, (u ? SYMBOL[u] : 'ε') + ' on its own'))),
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

    /* ---- calculators -------------------------------------------------------------------------- */

    /* T steps of DP-SGD: each step a Poisson-sampled Gaussian (Abadi et al., CCS 2016). A value left
     * undefined is left out of the JSON (the API then names it as required); null asks /calibrate
     * to solve for it. */
    function dpsgd(q, sigma, steps) {
        return {type: 'self_composed', count: steps,
                event: {type: 'poisson_sampled', sampling_rate: q, event: {type: 'gaussian', noise_multiplier: sigma}}};
    }
    const F_SIGMA = 'event.event.event.noise_multiplier', F_Q = 'event.event.sampling_rate', F_T = 'event.count';
    const num = (input) => (input.value.trim() === '' ? undefined : Number(input.value));
    function numIn(name, value, field, extra) {
        return h('input', Object.assign({name, type: 'text', inputmode: 'decimal', value: String(value),
                                         'data-field': field || name, autocomplete: 'off', size: 10}, extra || {}));
    }
    function resultRow(key, label, text) {
        return h('div', {class: 'result-row', 'data-result': key}, h('span', {class: 'bar-name'}, label),
                 h('span', {class: 'figure'}, text));
    }
    /* Runs fn over items, at most k at a time, keeping the order of the answers. */
    async function pool(items, k, fn) {
        const outv = new Array(items.length);
        let next = 0;
        const worker = async () => {
            while (next < items.length) {
                const i = next++;
                outv[i] = await fn(items[i]);
            }
        };
        await Promise.all(Array.from({length: Math.min(k, items.length)}, worker));
        return outv;
    }

    function epsilonPanel(main) {
        const q = numIn('sampling_rate', 0.01, F_Q), sigma = numIn('noise_multiplier', 1.1, F_SIGMA);
        const steps = numIn('steps', 10000, F_T), delta = numIn('delta', 1e-5);
        const acc = h('select', {name: 'accountant', 'data-field': 'accountant'},
                      h('option', {value: 'rdp'}, 'RDP (Rényi)'), h('option', {value: 'pld'}, 'PLD (privacy loss distribution)'));
        const out = h('div', {class: 'result', 'aria-live': 'polite'});
        const form = h('form', {id: 'calc-epsilon', class: 'inline'},
            DP.field('Sampling rate q', q), DP.field('Noise multiplier σ', sigma), DP.field('Steps T', steps),
            DP.field('δ', delta), DP.field('Accountant', acc),
            h('div', {class: 'field'}, h('button', {type: 'submit'}, 'Compute ε')));
        const box = h('section', {class: 'card calc', 'aria-labelledby': 'calc-eps-h'},
            h('h2', {id: 'calc-eps-h'}, 'ε of a DP-SGD run'),
            h('p', {class: 'note'}, 'T steps, each a Poisson-sampled Gaussian: POST /v1/accounting/epsilon, once for the ' +
                                    'run and once per point of the curve.'),
            form, out);
        const run = async () => {
            out.textContent = '';
            DP.fieldErrors(form, null);
            const body = (t) => ({event: dpsgd(num(q), num(sigma), t), delta: num(delta), accountant: acc.value});
            const T = num(steps);
            const a = await DP.api('POST', '/v1/accounting/epsilon', body(T));
            if (!box.isConnected)
                return;
            if (a.status !== 200) {
                DP.fieldErrors(form, a);
                return;
            }
            out.appendChild(resultRow('epsilon', 'ε', DP.fmtEps(a.body.epsilon) +
                                      (a.body.epsilon === null && a.body.reason ? ' (' + a.body.reason + ')' : '')));
            out.appendChild(h('p', {class: 'note'}, `at δ = ${a.body.delta}, ${a.body.accountant}` +
                (a.body.conversion ? ` (${a.body.conversion})` : '') +
                (a.body.optimal_order ? `, optimal order ${DP.fmtNum(a.body.optimal_order)}` : '') +
                (a.body.epsilon_lower !== undefined ? `, PLD bracket [${DP.fmtEpsDown(a.body.epsilon_lower)}, ` +
                                                      `${DP.fmtEps(a.body.epsilon)}]` : '')));
            /* The curve: ε after t steps for 16 values of t up to T (each its own call). */
            const n = Math.min(16, T);
            const ts = [...new Set(Array.from({length: n}, (_, k) => Math.ceil(T * (k + 1) / n)))];
            const answers = await pool(ts.slice(0, -1), 4, (t) => DP.api('POST', '/v1/accounting/epsilon', body(t)));
            if (!box.isConnected)
                return;
            answers.push(a);
            const bad = answers.find((x) => x.status !== 200);
            if (bad) {
                DP.error(out, bad);
                return;
            }
            const chartBox = out.appendChild(h('div', {class: 'chart', id: 'epsilon-chart'}));
            DP.chart(chartBox, {
                title: `ε after t steps of DP-SGD (q = ${num(q)}, σ = ${num(sigma)}, δ = ${num(delta)}), ${ts.length} points up to T = ${T}`,
                scales: {x: {time: false}, y: {range: (_, lo, hi) => [0, hi * 1.05]}},
                series: [{label: 'steps', value: (_, v) => (v === null ? '–' : String(v))},
                         {label: 'ε', stroke: '#0b5cad', width: 2, value: (_, v) => (v === null ? '–' : DP.fmtEps(v))}],
                axes: [{label: 'steps'}, {label: 'ε'}],
            }, [ts, answers.map((x) => x.body.epsilon)]);
        };
        form.addEventListener('submit', (ev) => {
            ev.preventDefault();
            run();
        });
        main.appendChild(box);
        return run;
    }

    function calibratePanel(main) {
        const target = numIn('target_epsilon', 2), delta = numIn('delta', 1e-5);
        const q = numIn('sampling_rate', 0.01, F_Q), sigma = numIn('noise_multiplier', 1.1, F_SIGMA);
        const steps = numIn('steps', 10000, F_T);
        const solve = h('select', {name: 'solve'},
                        h('option', {value: 'noise_multiplier'}, 'noise multiplier σ'),
                        h('option', {value: 'count'}, 'steps T'), h('option', {value: 'sampling_rate'}, 'sampling rate q'));
        const inputs = {noise_multiplier: sigma, count: steps, sampling_rate: q};
        const sync = () => {
            for (const [k, el] of Object.entries(inputs))
                el.disabled = k === solve.value;
        };
        solve.addEventListener('change', sync);
        sync();
        const out = h('div', {class: 'result', 'aria-live': 'polite'});
        const form = h('form', {id: 'calc-calibrate', class: 'inline'},
            DP.field('Solve for', solve), DP.field('Target ε', target), DP.field('δ', delta),
            DP.field('Noise multiplier σ', sigma), DP.field('Sampling rate q', q), DP.field('Steps T', steps),
            h('div', {class: 'field'}, h('button', {type: 'submit'}, 'Calibrate')));
        const box = h('section', {class: 'card calc', 'aria-labelledby': 'calc-cal-h'},
            h('h2', {id: 'calc-cal-h'}, 'Noise calibration'),
            h('p', {class: 'note'}, 'The smallest noise (or the most steps, or the largest sampling rate) whose ε ' +
                                    'stays within the target: POST /v1/accounting/calibrate.'),
            form, out);
        const run = async () => {
            out.textContent = '';
            DP.fieldErrors(form, null);
            const v = (k) => (k === solve.value ? null : num(inputs[k]));
            const body = {event: dpsgd(v('sampling_rate'), v('noise_multiplier'), v('count')),
                          target_epsilon: num(target), delta: num(delta)};
            const a = await DP.api('POST', '/v1/accounting/calibrate', body);
            if (!box.isConnected)
                return;
            if (a.status !== 200) {
                DP.fieldErrors(form, a);
                return;
            }
            const b = a.body;
            /* Shown on the safe side: more noise, fewer steps, a smaller sampling rate. */
            if (solve.value === 'noise_multiplier')
                out.appendChild(resultRow('noise_multiplier', 'σ', DP.fmtUp(b.noise_multiplier, 6)));
            else if (solve.value === 'count')
                out.appendChild(resultRow('count', 'steps T', String(b.count)));
            else
                out.appendChild(resultRow('sampling_rate', 'q', DP.fmtDown(b.sampling_rate, 6)));
            out.appendChild(resultRow('epsilon', 'achieved ε', DP.fmtEps(b.epsilon)));
            out.appendChild(h('p', {class: 'note'}, `target ε = ${b.target_epsilon} at δ = ${b.delta}; ` +
                              `${b.evaluations} evaluations (${b.accountant})`));
        };
        form.addEventListener('submit', (ev) => {
            ev.preventDefault();
            run();
        });
        main.appendChild(box);
        return run;
    }

    function tuningPanel(main) {
        const q = numIn('sampling_rate', 0.01, F_Q), sigma = numIn('noise_multiplier', 1.1, F_SIGMA);
        const steps = numIn('steps', 1000, F_T), delta = numIn('delta', 1e-5);
        const kind = h('select', {name: 'distribution', 'data-field': 'distribution'},
                       h('option', {value: 'geometric'}, 'geometric (η = 1)'),
                       h('option', {value: 'logarithmic'}, 'logarithmic (η = 0)'),
                       h('option', {value: 'poisson'}, 'Poisson'),
                       h('option', {value: 'truncated_negative_binomial'}, 'truncated negative binomial'),
                       h('option', {value: 'fixed'}, 'fixed number of runs'));
        const mean = numIn('mean', 10), eta = numIn('eta', 0.5);
        const grid = numIn('grid_size', 10, 'grid_size');
        const etaRow = DP.field('η', eta);
        const sync = () => {
            const k = kind.value;
            mean.setAttribute('data-field', k === 'fixed' ? 'distribution.fixed' : `distribution.${k}.mean`);
            eta.setAttribute('data-field', `distribution.${k}.eta`);
            etaRow.hidden = k !== 'truncated_negative_binomial';
            eta.disabled = etaRow.hidden;
        };
        kind.addEventListener('change', sync);
        sync();
        const out = h('div', {class: 'result', 'aria-live': 'polite'});
        const form = h('form', {id: 'calc-tuning', class: 'inline'},
            DP.field('Sampling rate q', q), DP.field('Noise multiplier σ', sigma), DP.field('Steps T per run', steps),
            DP.field('δ', delta), DP.field('Number of runs', kind), DP.field('Mean runs (or the number, fixed)', mean),
            etaRow, DP.field('Grid size', grid),
            h('div', {class: 'field'}, h('button', {type: 'submit'}, 'Price the search')));
        const box = h('section', {class: 'card calc', 'aria-labelledby': 'calc-tun-h'},
            h('h2', {id: 'calc-tun-h'}, 'Price of a private hyperparameter search'),
            h('p', {class: 'note'}, 'A random number of DP-SGD runs, each on a random grid value, the best one kept ' +
                                    '(Papernot & Steinke, ICLR 2022): POST /v1/tuning/cost. Naive: every grid value once.'),
            form, out);
        const run = async () => {
            out.textContent = '';
            DP.fieldErrors(form, null);
            const k = kind.value;
            const dist = k === 'fixed' ? {fixed: num(mean)}
                : k === 'truncated_negative_binomial' ? {[k]: {eta: num(eta), mean: num(mean)}} : {[k]: {mean: num(mean)}};
            const body = {event: dpsgd(num(q), num(sigma), num(steps)), distribution: dist, delta: num(delta)};
            if (grid.value.trim() !== '')
                body.grid_size = num(grid);
            const a = await DP.api('POST', '/v1/tuning/cost', body);
            if (!box.isConnected)
                return;
            if (a.status !== 200) {
                DP.fieldErrors(form, a);
                return;
            }
            const b = a.body;
            const top = Math.max(b.epsilon || 0, b.epsilon_naive || 0, b.epsilon_one_run || 0);
            const bar = (key, label, v, note) => h('div', {class: 'bar-row', 'data-result': key},
                h('span', {class: 'bar-name'}, label),
                DP.meter(v === null ? top : v, top, 'ε ' + DP.fmtEps(v) + (note ? ' ' + note : '')));
            out.appendChild(h('div', {class: 'bars wide'},
                bar('epsilon_one_run', 'one run', b.epsilon_one_run),
                bar('epsilon', 'the search', b.epsilon, `(${DP.fmtNum(b.expected_runs)} runs expected)`),
                bar('epsilon_naive', 'naive', b.epsilon_naive,
                    b.epsilon_naive === null ? '(' + (b.epsilon_naive_reason || 'no grid size') + ')' : `(${b.naive_runs} runs)`)));
            out.appendChild(h('p', {class: 'note'}, `P(no run) = ${DP.fmtNum(b.prob_no_run)}; ` +
                              (b.accounting ? `${b.accounting.bound || ''}` : '')));
        };
        form.addEventListener('submit', (ev) => {
            ev.preventDefault();
            run();
        });
        main.appendChild(box);
        return run;
    }

    DP.route('#/calculators', async (params, main) => {
        main.appendChild(h('h1', null, 'Calculators'));
        main.appendChild(h('p', {class: 'note'}, 'Stateless and open: they need no token and charge nothing ' +
                                                 '(docs/ACCOUNTING.md, docs/TUNING.md).'));
        const runs = [epsilonPanel(main), calibratePanel(main), tuningPanel(main)];
        await Promise.all(runs.map((r) => r()));
    });

    /* ---- estimator runs ----------------------------------------------------------------------- */

    DP.route('#/runs', async (params, main, query) => {
        main.appendChild(h('h1', null, 'Estimator runs'));
        main.appendChild(h('p', {class: 'note'}, 'Every call of POST /v1/estimators/{gaussian,beta,mixture} is stored as a ' +
                                                 'run (docs/ESTIMATORS.md); with tokens, each caller sees the runs it may read.'));
        const limit = query.limit || '50';
        const a = await DP.api('GET', `/v1/runs?limit=${encodeURIComponent(limit)}` +
                                      (query.after ? `&after=${encodeURIComponent(query.after)}` : ''));
        if (!DP.alive(main))
            return;
        if (a.status !== 200) {
            DP.error(main, a);
            return;
        }
        const runs = a.body.runs;
        if (!runs.length) {
            main.appendChild(h('p', null, query.after ? 'No more runs.' : 'No runs yet.'));
        } else {
            main.appendChild(h('table', {class: 'runs'},
                h('thead', null, h('tr', null, h('th', {scope: 'col', class: 'num'}, 'id'),
                    h('th', {scope: 'col'}, 'model'), h('th', {scope: 'col'}, 'created'),
                    h('th', {scope: 'col'}, 'status'), h('th', {scope: 'col'}, 'privacy'),
                    h('th', {scope: 'col', class: 'num'}, 'clients'))),
                h('tbody', null, runs.map((r) => h('tr', {'data-run': r.id},
                    h('td', {class: 'num'}, h('a', {href: '#/runs/' + r.id}, String(r.id))),
                    h('td', null, r.kind), h('td', null, DP.fmtTime(r.created_at)),
                    h('td', {'data-status': ''}, r.status), h('td', null, r.private ? 'private' : 'not private'),
                    h('td', {class: 'num'}, String(r.n_clients)))))));
        }
        const nav = h('nav', {class: 'pager', 'aria-label': 'Pages of the runs'});
        if (query.after)
            nav.appendChild(h('a', {href: hashWith('#/runs', {limit: query.limit})}, 'First page'));
        if (a.body.next_after !== null)
            nav.appendChild(h('a', {href: hashWith('#/runs', {limit: query.limit, after: a.body.next_after}), rel: 'next'},
                              'Next page'));
        main.appendChild(nav);
    });

    const mean = (xs) => xs.reduce((p, c) => p + c, 0) / xs.length;
    /* A client's raw estimate, coordinate k, from the data the run kept (null when it kept none). */
    function rawOf(c, k) {
        if (!c)
            return null;
        const pick = (v) => (Array.isArray(v) ? v[k] : v);
        if (c.mean !== undefined)
            return pick(c.mean);
        if (c.successes !== undefined && c.trials)
            return c.successes / c.trials;
        if (Array.isArray(c.samples) && c.samples.length) {
            const xs = c.samples.map((s) => Number(Array.isArray(s) ? s[k] : s));
            return mean(xs);
        }
        return null;
    }
    function countOf(c) {
        if (!c)
            return null;
        return c.n !== undefined ? c.n : c.trials !== undefined ? c.trials : Array.isArray(c.samples) ? c.samples.length : null;
    }
    const coord = (v, k) => (Array.isArray(v) ? v[k] : v);

    function priorText(o) {
        const p = o.prior;
        if (!p)
            return '–';
        if (Array.isArray(p.components))
            return p.components.map((c) => `${DP.fmtNum(c.weight)} × N(${DP.fmtNum(coord(c.mean, 0))}, ` +
                                           `${DP.fmtNum(coord(c.variance, 0))})`).join(' + ') + ` (${p.source})`;
        if (p.alpha !== undefined || p.beta !== undefined)
            return `Beta(${DP.fmtNum(p.alpha)}, ${DP.fmtNum(p.beta)})` + (p.mean !== undefined ? `, mean ${DP.fmtNum(p.mean)}` : '') +
                   (p.source ? ` (${p.source})` : '');
        return `N(${DP.fmtNum(coord(p.mean, 0))}, ${DP.fmtNum(coord(p.variance, 0))})` + (p.source ? ` (${p.source})` : '');
    }
    /* The prior's mean in coordinate k (the point the estimates shrink toward), or null. */
    function priorMean(o, k) {
        const p = o.prior;
        if (!p)
            return null;
        if (p.mean !== undefined && p.mean !== null)
            return coord(p.mean, k);
        if (typeof p.alpha === 'number' && typeof p.beta === 'number')
            return p.alpha / (p.alpha + p.beta);
        return null;
    }

    function shrinkagePlot(box, run, k, raw) {
        const o = run.outputs;
        const rows = o.estimates.map((e, i) => ({raw: raw[i], post: coord(e.posterior_mean, k), sh: coord(e.shrinkage, k)}))
            .filter((r) => typeof r.raw === 'number' && typeof r.post === 'number').sort((p, q) => p.raw - q.raw);
        if (!rows.length)
            return null;
        const xs = rows.map((r) => r.raw);
        const pm = priorMean(o, k);
        const series = [{label: 'raw'},
                        {label: 'personalised', stroke: '#0b5cad', width: 0, paths: () => null,
                         points: {show: true, size: 8, fill: '#0b5cad'}, value: (_, v) => (v === null ? '–' : DP.fmtNum(v))},
                        {label: 'raw = personalised', stroke: '#57606a', dash: [4, 4], width: 1, points: {show: false}}];
        const data = [xs, rows.map((r) => r.post), xs.slice()];
        if (pm !== null) {
            series.push({label: 'prior mean', stroke: '#a40e26', dash: [8, 3], width: 1.5, points: {show: false},
                         value: (_, v) => (v === null ? '–' : DP.fmtNum(v))});
            data.push(xs.map(() => pm));
        }
        return DP.chart(box, {
            title: `Personalised against raw estimates of run ${run.id}: ${rows.length} clients; ` +
                   'a point on the dashed diagonal kept its own estimate, one on the prior mean was fully pooled',
            scales: {x: {time: false}},
            series,
            axes: [{label: 'raw estimate (the client\'s own)'}, {label: 'personalised estimate'}],
        }, data);
    }

    DP.route('#/runs/:id', async (params, main, query) => {
        main.appendChild(h('p', null, h('a', {href: '#/runs'}, '← all runs')));
        const a = await DP.api('GET', '/v1/runs/' + encodeURIComponent(params.id));
        if (!DP.alive(main))
            return;
        if (a.status !== 200) {
            main.appendChild(h('h1', null, 'Run ' + params.id));
            DP.error(main, a);
            return;
        }
        const run = a.body, o = run.outputs || {}, inp = run.inputs || {};
        main.appendChild(h('h1', null, `Run ${run.id}: ${run.kind}`));
        const priv = o.privacy;
        main.appendChild(h('div', {class: 'card'},
            h('p', null, `${run.n_clients} clients · ${o.method || inp.method || ''} · status `,
              h('span', {'data-status': ''}, run.status), ' · created ', DP.fmtTime(run.created_at)),
            h('p', null, 'prior: ', h('span', {'data-prior': ''}, priorText(o))),
            h('p', null, 'privacy: ', priv ? [
                `${priv.mechanism || priv.scheme || 'local DP'}, ε₀ = ${priv.epsilon0}` +
                    (priv.delta !== undefined ? `, δ = ${priv.delta}` : ''),
                Array.isArray(priv.charges) && priv.charges.length ? [' · charged: ', priv.charges.map((c, i) => [
                    i ? ', ' : '', h('a', {href: '#/silos/' + c.silo_id}, 'silo ' + c.silo_id),
                    ` (${c.clients} client${c.clients === 1 ? '' : 's'})`])] : null]
                : 'none (the estimates use the clients\' exact summaries)')));
        const est = Array.isArray(o.estimates) ? o.estimates : [];
        if (!est.length) {
            main.appendChild(o.keep_results === false
                ? h('p', {'data-not-kept': ''}, 'This run did not keep its per-client estimates (it was sent without ' +
                    '"keep_results": true): its fit is above.')
                : h('p', null, 'This run has no estimates.'));
            return;
        }
        const dim = Array.isArray(est[0].posterior_mean) ? est[0].posterior_mean.length : 1;
        const k = Math.min(Math.max(parseInt(query.coordinate || '0', 10) || 0, 0), dim - 1);
        const clients = Array.isArray(inp.clients) ? inp.clients : null;
        const raw = est.map((e, i) => (clients ? rawOf(clients[i], k) : null));
        const plotBox = h('section', {'aria-labelledby': 'shrink-h'}, h('h2', {id: 'shrink-h'}, 'Raw against personalised'));
        main.appendChild(plotBox);
        if (dim > 1) {
            const sel = h('select', {name: 'coordinate'},
                          Array.from({length: dim}, (_, j) => h('option', {value: String(j), selected: j === k}, String(j))));
            sel.addEventListener('change', () => DP.go(hashWith('#/runs/' + run.id, {coordinate: sel.value})));
            plotBox.appendChild(h('form', {class: 'inline'}, DP.field('Coordinate', sel)));
        }
        if (!clients) {
            plotBox.appendChild(h('p', {class: 'note', 'data-no-raw': ''}, 'The raw estimates are not stored for this run ' +
                '(it was sent without "keep_data": true); the table shows the personalised estimates and their shrinkage.'));
        } else {
            shrinkagePlot(plotBox.appendChild(h('div', {class: 'chart', id: 'shrink-chart'})), run, k, raw);
        }
        /* The shrinkage itself, client by client: against the client's amount of data when the run
         * kept it (less data, more shrinkage), else in the order of the shrinkage. */
        const shBox = h('section', {'aria-labelledby': 'sh-h'}, h('h2', {id: 'sh-h'}, 'Shrinkage'));
        main.appendChild(shBox);
        const counts = est.map((e, i) => (clients ? countOf(clients[i]) : null));
        const byN = counts.every((c) => typeof c === 'number');
        const pts = est.map((e, i) => ({x: byN ? counts[i] : 0, y: coord(e.shrinkage, k)}))
            .filter((p) => typeof p.y === 'number').sort((p, q) => (byN ? p.x - q.x : p.y - q.y));
        pts.forEach((p, i) => {
            if (!byN)
                p.x = i + 1;
        });
        DP.chart(shBox.appendChild(h('div', {class: 'chart', id: 'shrinkage-chart'})), {
            title: `Shrinkage of each client's estimate toward the prior (0: its own estimate kept, 1: fully pooled), ` +
                   (byN ? 'against its number of observations' : 'clients in increasing order of shrinkage'),
            height: 200,
            scales: {x: {time: false}, y: {range: [0, 1]}},
            series: [{label: byN ? 'observations' : 'client (rank)'},
                     {label: 'shrinkage', stroke: '#0b5cad', width: 0, paths: () => null,
                      points: {show: true, size: 8, fill: '#0b5cad'}, value: (_, v) => (v === null ? '–' : DP.fmtNum(v))}],
            axes: [{label: byN ? 'observations n' : 'clients, by shrinkage'}, {label: 'shrinkage'}],
        }, [pts.map((p) => p.x), pts.map((p) => p.y)]);

        const MAX = 500;
        main.appendChild(h('section', {'aria-labelledby': 'est-h'}, h('h2', {id: 'est-h'}, 'Estimates'),
            est.length > MAX ? h('p', {class: 'note'}, `The first ${MAX} of ${est.length} clients.`) : null,
            h('table', {class: 'estimates'},
                h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'client'),
                    clients ? h('th', {scope: 'col', class: 'num'}, 'n') : null,
                    clients ? h('th', {scope: 'col', class: 'num'}, 'raw') : null,
                    h('th', {scope: 'col', class: 'num'}, 'personalised'), h('th', {scope: 'col', class: 'num'}, 'sd'),
                    h('th', {scope: 'col', class: 'num'}, 'shrinkage'))),
                h('tbody', null, est.slice(0, MAX).map((e, i) => h('tr', {'data-client': String(i)},
                    h('td', null, e.id !== undefined ? String(e.id) : '#' + (i + 1)),
                    clients ? h('td', {class: 'num'}, String(countOf(clients[i]) ?? '–')) : null,
                    clients ? h('td', {class: 'num', 'data-raw': ''}, DP.fmtNum(raw[i])) : null,
                    h('td', {class: 'num', 'data-post': ''}, DP.fmtNum(coord(e.posterior_mean, k))),
                    h('td', {class: 'num'}, DP.fmtNum(coord(e.posterior_sd, k))),
                    h('td', {class: 'num', 'data-shrinkage': ''}, DP.fmtNum(coord(e.shrinkage, k)))))))));
    });

    /* Exposed for the job pages and the tests. */
    DP.silo = {unitOf, figures, budgetBars, accountantOf, eventSummary};
})();
