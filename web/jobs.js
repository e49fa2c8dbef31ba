/*
 * jobs.js: the job pages of the dashboard (docs/DASHBOARD.md "Jobs"): the jobs list, a job's live
 * page and the launch form. Registers '#/jobs', '#/jobs/:id' and '#/launch' with DP.route (contract
 * at the top of app.js). A client of the public API only:
 *
 *   #/jobs          GET /v1/jobs?limit=&after=&status=       status, progress bar, paginated
 *   #/jobs/:id      GET /v1/jobs/{id}                        status, progress, spec, plan
 *                   GET /v1/jobs/{id}/metrics?after=ROUND    loss, accuracy/MSE and epsilon charts, the
 *                                                            per-silo table
 *                   GET /v1/jobs/{id}/events                 live: each round or status event makes the
 *                                                            page read what is new
 *                   POST /v1/jobs/{id}/cancel                the cancel button
 *   #/launch        GET /v1/datasets, GET /v1/silos          the form's choices
 *                   POST /v1/jobs/plan                       the dry run: planned epsilon per silo and
 *                                                            each bound silo's budget check
 *                   POST /v1/jobs                            the launch; a 400 is shown beside its field
 *
 * LIVE UPDATES. The events route answers complete text/event-stream bodies (the events so far, then
 * "retry: 1000"; it waits up to 15 s when nothing is new; "event: end" after the final status; 204
 * once a finished job's stream has been read). Without a token the page uses the browser's
 * EventSource, which follows that protocol by itself (Last-Event-ID on each reconnection, closed
 * for good by the 204). EventSource cannot send an Authorization header, and the route wants the
 * token like every other one (a token in the URL would end up in logs and history), so with a token
 * the page reads the same stream with fetch() and the header (DP.stream) and asks again with
 * ?after=<last id>, as EventSource would. Either way an event only says that something is new: the
 * figures come from the metrics route (?after=<last round shown>). When the stream fails (the
 * EventSource errors three times in a row, or fetch streaming fails twice), the page falls back to
 * polling GET /v1/jobs/{id} and its metrics every two seconds. The state is shown in words
 * ([data-live]: "events", "polling", "ended").
 */
'use strict';

(function () {
    const h = DP.h;
    const FINAL = new Set(['succeeded', 'failed', 'cancelled', 'interrupted']);
    const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted'];
    const PAGE = 20;
    const POLL_MS = 2000;
    const MAX_EPS_SERIES = 24; /* silos drawn in the epsilon chart (the table lists them all) */
    const MAX_ROUNDS = 5000;   /* rounds kept on the charts: the latest ones of a longer job */
    const ALGORITHMS = ['local', 'fedavg', 'finetune', 'mrmtl', 'ditto', 'dp_fedavg', 'ppsgd', 'fedhdp',
                        'altmin', 'adaped', 'dp_adaped'];
    /* Distinct strokes and dashes: a series is told by its legend label and its dash, not by colour
     * alone. */
    const PALETTE = ['#0b5cad', '#b35900', '#1a7f37', '#8250df', '#a40e26', '#0a7480', '#6e7781',
                     '#bf3989'];
    const DASHES = [[], [6, 3], [2, 3], [8, 3, 2, 3]];

    const jobPath = (id) => '/v1/jobs/' + encodeURIComponent(id);
    const statusTag = (s) => h('span', {class: 'tag status-' + s, 'data-status': s}, s);

    function progressBar(j) {
        const done = j.rounds_done || 0;
        return DP.meter(done, j.rounds, done + ' of ' + j.rounds + ' rounds');
    }

    /* ---- #/jobs -------------------------------------------------------------------------------- */

    DP.route('#/jobs', async (params, main, query) => {
        main.appendChild(h('h1', null, 'Jobs'));
        const status = STATUSES.includes(query.status) ? query.status : '';
        const after = /^\d+$/.test(query.after || '') ? Number(query.after) : 0;
        const sel = h('select', {name: 'status', id: 'jobs-status'},
                      h('option', {value: ''}, 'any'), STATUSES.map((s) => h('option', {value: s}, s)));
        sel.value = status;
        sel.addEventListener('change', () => DP.go('#/jobs' + (sel.value ? '?status=' + sel.value : '')));
        main.appendChild(h('form', {class: 'inline', onsubmit: (e) => e.preventDefault()},
                           DP.field('Status', sel), h('p', null, h('a', {href: '#/launch'}, 'Launch a job'))));
        const box = h('div', {'data-jobs': ''});
        main.appendChild(box);
        let timer = null;
        const load = async () => {
            const qs = new URLSearchParams({limit: String(PAGE)});
            if (after)
                qs.set('after', String(after));
            if (status)
                qs.set('status', status);
            const a = await DP.api('GET', '/v1/jobs?' + qs);
            if (!DP.alive(main))
                return;
            box.textContent = '';
            if (a.status !== 200) {
                DP.error(box, a);
                return;
            }
            const jobs = a.body.jobs;
            if (!jobs.length) {
                box.appendChild(h('p', null, after ? 'No more jobs.' : 'No jobs yet.'));
            } else {
                box.appendChild(h('table', {class: 'jobs'},
                    h('caption', {class: 'note'}, 'Jobs by id' + (status ? ', status ' + status : '')),
                    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Job'), h('th', {scope: 'col'}, 'Algorithm'),
                                       h('th', {scope: 'col'}, 'Status'), h('th', {scope: 'col'}, 'Progress'),
                                       h('th', {scope: 'col'}, 'Created'))),
                    h('tbody', null, jobs.map((j) => h('tr', {class: 'job', 'data-job': j.id},
                        h('td', null, h('a', {href: '#/jobs/' + j.id}, '#' + j.id + (j.name ? ' ' + j.name : ''))),
                        h('td', null, j.algorithm),
                        h('td', null, statusTag(j.status), j.cancel_requested && !FINAL.has(j.status)
                            ? h('span', {class: 'note'}, ' cancelling') : null),
                        h('td', {'data-progress': ''}, progressBar(j)),
                        h('td', null, DP.fmtTime(j.created_at)))))));
            }
            const base = '#/jobs?' + (status ? 'status=' + status + '&' : '');
            box.appendChild(h('p', {class: 'pager'},
                after ? h('a', {href: base.replace(/[?&]$/, '')}, 'First page') : null,
                a.body.next_after !== null ? h('a', {href: base + 'after=' + a.body.next_after, rel: 'next'}, 'Next page')
                                           : null));
            /* jobs still moving: their progress is read again */
            if (jobs.some((j) => !FINAL.has(j.status)))
                timer = setTimeout(load, POLL_MS);
        };
        await load();
        return () => clearTimeout(timer);
    });

    /* ---- #/jobs/:id ---------------------------------------------------------------------------- */

    /* The figures of one round a chart draws (null where the round has none). */
    function seriesOf(rounds, pick) {
        return rounds.map((r) => {
            const v = pick(r);
            return typeof v === 'number' && isFinite(v) ? v : null;
        });
    }

    /* uPlot draws the title; the caption says what the lines are */
    function chartBox(note) {
        const c = h('div', {class: 'chart'});
        return {el: h('figure', {class: 'card'}, c, h('figcaption', {class: 'note'}, note)), c};
    }

    function lineSeries(label, i) {
        return {label, stroke: PALETTE[i % PALETTE.length], dash: DASHES[i % DASHES.length], width: 2,
                spanGaps: true, points: {show: false}};
    }

    /* The three charts of a job; update(rounds) redraws them with every round so far. */
    function jobCharts(parent, job, metric) {
        const silos = (job.plan && job.plan.silos) || [];
        const m = metric || 'mse';
        const hasGlobal = (r) => r.global !== null && r.global !== undefined;
        const defs = [
            {key: 'loss', title: 'Loss per round', note: 'training and test loss, global and personalised models',
             lines: [['global test loss', (r) => hasGlobal(r) ? r.global.test_loss : null],
                     ['personalised test loss', (r) => r.personalized && r.personalized.test_loss],
                     ['global train loss', (r) => hasGlobal(r) ? r.global.train_loss : null],
                     ['personalised train loss', (r) => r.personalized && r.personalized.train_loss]]},
            {key: 'metric', title: (m === 'accuracy' ? 'Test accuracy' : 'Test MSE') + ' per round',
             note: 'pooled over the silos\' test rows',
             lines: [['global', (r) => hasGlobal(r) ? r.global['test_' + m] : null],
                     ['personalised', (r) => r.personalized && r.personalized['test_' + m]]]},
        ];
        const priv = silos.some((s) => s.epsilon !== null && s.epsilon !== undefined);
        if (priv) {
            const shown = silos.slice(0, MAX_EPS_SERIES);
            defs.push({key: 'epsilon', title: 'ε spent per silo',
                       note: 'bound silos: the ledger\'s cumulative ε; others: this job\'s' +
                             (silos.length > shown.length ? ' (the first ' + shown.length + ' of ' + silos.length + ' silos)' : ''),
                       lines: shown.map((s, k) => ['ε ' + s.name, (r) => r.silos && r.silos[k] ? r.silos[k].epsilon : null])});
        }
        const grid = h('div', {class: 'grid2'});
        parent.appendChild(grid);
        const charts = defs.map((d) => {
            const b = chartBox(d.note);
            b.el.setAttribute('data-chart', d.key);
            grid.appendChild(b.el);
            return {d, b, u: null};
        });
        return {
            update(rounds) {
                for (const c of charts) {
                    const data = [rounds.map((r) => r.round), ...c.d.lines.map(([, pick]) => seriesOf(rounds, pick))];
                    c.b.el.setAttribute('data-points', String(rounds.length));
                    if (!c.u) {
                        if (!rounds.length)
                            continue;
                        c.u = DP.chart(c.b.c, {title: c.d.title, scales: {x: {time: false}},
                                               axes: [{label: 'round'}, {}],
                                               series: [{label: 'round'}, ...c.d.lines.map(([label], i) => lineSeries(label, i))]},
                                       data);
                    } else {
                        c.u.setData(data);
                    }
                }
            },
        };
    }

    function siloTable(job, last) {
        const plan = (job.plan && job.plan.silos) || [];
        const m = last ? last.metric : null;
        const metricName = m === 'accuracy' ? 'accuracy' : 'MSE';
        const rows = plan.map((p, k) => {
            const s = last && last.silos ? last.silos[k] : null;
            const num = (v) => h('td', {class: 'num'}, typeof v === 'number' ? DP.fmtNum(v) : '–');
            const eps = (v, name) => h('td', {class: 'num', 'data-eps': name},
                                       v === null || v === undefined ? '–' : DP.fmtEps(v));
            return h('tr', {'data-silo': p.name},
                h('th', {scope: 'row'}, p.name),
                h('td', null, p.silo_id ? h('a', {href: '#/silos/' + p.silo_id}, '#' + p.silo_id) : 'not bound'),
                h('td', {class: 'num'}, String(p.n_train), ' / ', String(p.n_test)),
                h('td', {class: 'num'}, s ? String(s.rounds_trained) : '0'),
                num(s && m ? s['test_' + m] : null),
                num(s && s.global && m ? s.global['test_' + m] : null),
                num(s ? s.test_loss : null),
                eps(p.epsilon, 'planned'),
                eps(s ? s.epsilon : null, 'epsilon'),
                eps(s ? s.job_epsilon : null, 'job'),
                h('td', {'data-stopped': s && s.stopped ? 'yes' : 'no'},
                  s && s.stopped ? h('strong', null, 'stopped: budget exhausted') : 'no'));
        });
        return h('table', {class: 'silo-table'},
            h('caption', {class: 'note'}, last ? 'After round ' + last.round : 'No round yet: the plan'),
            h('thead', null, h('tr', null, ['Silo', 'Ledger silo', 'Train / test rows', 'Rounds trained',
                'Personal test ' + metricName, 'Global test ' + metricName, 'Personal test loss', 'Planned ε',
                'ε (ledger or job)', 'ε of this job', 'Stopped'].map((t) => h('th', {scope: 'col'}, t)))),
            h('tbody', null, rows));
    }

    DP.route('#/jobs/:id', async (params, main) => {
        const id = params.id;
        const first = await DP.api('GET', jobPath(id));
        if (!DP.alive(main))
            return;
        if (first.status !== 200) {
            main.appendChild(h('h1', null, 'Job ' + id));
            DP.error(main, first);
            return;
        }
        let job = first.body;
        const head = h('div', {class: 'job-head'});
        const live = h('span', {class: 'note', 'data-live': ''});
        const cancelBox = h('div', {'data-cancel': ''});
        main.append(h('h1', null, 'Job #' + job.id, job.name ? ' ' + job.name : ''), head,
                    h('p', null, 'Updates: ', live), cancelBox);
        let rounds = [];
        let charts = null;
        const tableBox = h('div', {'data-silos': ''});
        const chartsBox = h('div');
        const plan = job.plan || {};
        main.append(h('h2', null, 'Rounds'), chartsBox, h('h2', null, 'Silos'), tableBox,
                    h('details', {class: 'card', 'data-spec': ''},
                      h('summary', null, 'The spec it was launched with'),
                      h('pre', null, JSON.stringify(job.spec, null, 2))),
                    h('details', {class: 'card'}, h('summary', null, 'Its plan (privacy unit ' + (plan.privacy_unit || '–') + ')'),
                      h('pre', null, JSON.stringify(plan, null, 2))));

        const drawHead = () => {
            head.textContent = '';
            head.append(h('p', null, statusTag(job.status), ' ', job.algorithm,
                          job.cancel_requested && !FINAL.has(job.status) ? h('span', {class: 'note'}, ' · cancel requested: ends after its current round') : null,
                          job.reason ? h('span', {'data-reason': ''}, ' · ' + job.reason) : null),
                        h('div', {'data-progress': ''}, progressBar(job)),
                        h('p', {class: 'note'}, 'created ' + DP.fmtTime(job.created_at),
                          job.started_at ? ' · started ' + DP.fmtTime(job.started_at) : '',
                          job.finished_at ? ' · finished ' + DP.fmtTime(job.finished_at) : ''));
            cancelBox.textContent = '';
            if (!FINAL.has(job.status) && !job.cancel_requested) {
                const b = h('button', {type: 'button', 'data-action': 'cancel'}, 'Cancel this job');
                b.addEventListener('click', async () => {
                    b.disabled = true;
                    const a = await DP.api('POST', jobPath(id) + '/cancel');
                    if (!DP.alive(main))
                        return;
                    if (a.status === 202) {
                        job = a.body;
                        drawHead();
                    } else {
                        b.disabled = false;
                        DP.error(cancelBox, a);
                    }
                });
                cancelBox.appendChild(b);
            }
        };
        const drawRounds = () => {
            if (!charts && rounds.length)
                charts = jobCharts(chartsBox, job, rounds[0].metric);
            if (charts)
                charts.update(rounds);
            else if (!chartsBox.firstChild)
                chartsBox.appendChild(h('p', {class: 'note', 'data-no-rounds': ''}, 'No round has finished yet.'));
            if (charts && chartsBox.querySelector('[data-no-rounds]'))
                chartsBox.querySelector('[data-no-rounds]').remove();
            if (rounds.length && rounds[0].round > 1)
                (chartsBox.querySelector('[data-window]') ||
                 chartsBox.insertBefore(h('p', {class: 'note', 'data-window': ''}), chartsBox.firstChild)).textContent =
                    'The latest ' + rounds.length + ' rounds (from round ' + rounds[0].round + ').';
            tableBox.textContent = '';
            tableBox.appendChild(siloTable(job, rounds.length ? rounds[rounds.length - 1] : null));
        };

        /* Reads what is new: the job, then the rounds after the last one shown. One read at a time;
         * a request for more while one runs makes it read again once done. */
        let busy = null, again = false;
        let left = false; /* the user has left the page: nothing more is read or drawn */
        let over = false; /* the live updates have ended (the job ended, or the page was left) */
        const refresh = async () => {
            if (busy) {
                again = true;
                return busy;
            }
            busy = (async () => {
                do {
                    again = false;
                    const j = await DP.api('GET', jobPath(id));
                    if (left || !DP.alive(main))
                        return;
                    if (j.status === 200)
                        job = j.body;
                    for (;;) {
                        const after = rounds.length ? rounds[rounds.length - 1].round
                                                    : Math.max(0, (job.rounds_done || 0) - MAX_ROUNDS);
                        const a = await DP.api('GET', jobPath(id) + '/metrics?limit=1000' + (after ? '&after=' + after : ''));
                        if (left || !DP.alive(main))
                            return;
                        if (a.status !== 200)
                            break;
                        rounds = rounds.concat(a.body.rounds.filter((r) => r.round > after));
                        if (rounds.length > MAX_ROUNDS)
                            rounds = rounds.slice(rounds.length - MAX_ROUNDS);
                        if (a.body.next_after === null)
                            break;
                    }
                    drawHead();
                    drawRounds();
                } while (again);
            })();
            try {
                await busy;
            } finally {
                busy = null;
            }
        };
        await refresh();
        if (!DP.alive(main))
            return;

        /* ---- live ---- */
        let es = null, stream = null, timer = null;
        const setLive = (state, why) => {
            live.setAttribute('data-live', state);
            live.textContent = {events: 'live (server-sent events)', polling: 'polling every 2 s' + (why ? ' (' + why + ')' : ''),
                                ended: 'the job has ended'}[state];
        };
        const close = () => {
            if (es)
                es.close();
            if (stream)
                stream.close();
            clearTimeout(timer);
        };
        const end = async () => {
            if (over)
                return;
            over = true;
            close();
            await refresh(); /* the final status and the last rounds */
            if (!left)
                setLive('ended');
        };
        const poll = (why) => {
            if (over)
                return;
            if (es)
                es.close();
            if (stream)
                stream.close();
            setLive('polling', why);
            const tick = async () => {
                await refresh();
                if (over || !DP.alive(main))
                    return;
                if (FINAL.has(job.status))
                    end();
                else
                    timer = setTimeout(tick, POLL_MS);
            };
            timer = setTimeout(tick, POLL_MS);
        };
        const onEvent = (type) => {
            if (type === 'end')
                end();
            else if (type === 'round' || type === 'status')
                refresh();
        };

        if (FINAL.has(job.status)) {
            setLive('ended');
        } else if (!DP.token() && typeof EventSource === 'function') {
            setLive('events');
            es = new EventSource(jobPath(id) + '/events');
            /* Every answer is complete, so the browser sees each one end ("error", then it asks
             * again by itself): only errors without an answer in between count as failures. */
            let errors = 0, opened = false;
            es.addEventListener('open', () => {
                opened = true;
                errors = 0;
            });
            es.addEventListener('round', () => onEvent('round'));
            es.addEventListener('status', () => onEvent('status'));
            es.addEventListener('end', () => onEvent('end'));
            es.addEventListener('error', () => {
                if (over)
                    return;
                /* CLOSED: the server ended the stream (204) or refused it; else the browser retries */
                if (es.readyState === EventSource.CLOSED)
                    refresh().then(() => (FINAL.has(job.status) ? end() : poll('the event stream closed')));
                else if (opened)
                    opened = false;
                else if (++errors >= 3)
                    poll('the event stream failed');
            });
        } else {
            /* with a token: the same protocol over fetch, the token in the Authorization header */
            setLive('events');
            let lastId = 0, failures = 0;
            const next = async () => {
                if (over || !DP.alive(main))
                    return;
                let n = 0, ended = false, retry = 1000;
                stream = DP.stream(jobPath(id) + '/events' + (lastId ? '?after=' + lastId : ''), (ev) => {
                    if (ev.id)
                        lastId = ev.id;
                    n++;
                    if (ev.event === 'end')
                        ended = true;
                    else
                        onEvent(ev.event);
                });
                const st = await stream.done;
                if (over || !DP.alive(main))
                    return;
                if (ended || st === 204)
                    return end();
                if (st !== 200) {
                    if (++failures >= 2)
                        return poll('the event stream failed (' + (st || 'no answer') + ')');
                } else {
                    failures = 0;
                }
                /* an answer with events: ask again at once (the server waits while nothing is new) */
                timer = setTimeout(next, n > 0 && st === 200 ? 0 : retry);
            };
            next();
        }
        return () => {
            left = true;
            over = true;
            close();
        };
    });

    /* ---- #/launch ------------------------------------------------------------------------------ */

    const GEN_PARAMS = [['silos', 'silos', 'number of silos'], ['dim', 'features', null], ['n_min', 'rows per silo, at least', null],
                        ['n_max', 'rows per silo, at most', null], ['tau', 'heterogeneity τ', null],
                        ['noise', 'label noise', null], ['classes', 'classes', 'synthetic-classification only'],
                        ['seed', 'generator seed', null]];

    function input(name, attrs) {
        return h('input', Object.assign({name, type: 'number', step: 'any'}, attrs || {}));
    }

    DP.route('#/launch', async (params, main) => {
        main.appendChild(h('h1', null, 'Launch a job'));
        main.appendChild(h('p', {class: 'note'}, 'The common fields of a job spec (docs/TRAINING.md "The job spec"); ' +
            'anything else goes in "More fields". "Plan" asks the daemon for a dry run: every silo\'s noise and ' +
            'planned ε, and each bound silo\'s budget checked. Nothing is stored or spent until "Launch".'));
        const [ds, silos] = await Promise.all([DP.pageAll('/v1/datasets', 'datasets'), DP.pageAll('/v1/silos', 'silos')]);
        if (!DP.alive(main))
            return;
        if (ds.answer) {
            DP.error(main, ds.answer);
            return;
        }
        /* a silo token may not list the silos (admin only): then ledger silos are typed as ids */
        const ledger = silos.answer ? null : silos.items.filter((s) => !s.archived);
        const datasets = ds.items.filter((d) => d.kind !== 'dataset' || d.available !== false);

        const f = {};
        const el = (name, control) => (f[name] = control);
        el('name', h('input', {name: 'name', type: 'text', maxlength: 128}));
        el('algorithm', h('select', {name: 'algorithm'}, ALGORITHMS.map((a) => h('option', {value: a}, a))));
        f.algorithm.value = 'mrmtl';
        el('dataset', h('select', {name: 'dataset'}, datasets.map((d) => h('option', {value: String(d.id)},
            d.kind === 'upload' ? 'upload #' + d.id + (d.name ? ' ' + d.name : '') + ' (' + d.rows + ' rows)' : String(d.id)))));
        const firstGen = datasets.find((d) => d.kind === 'generator');
        if (firstGen)
            f.dataset.value = String(firstGen.id);
        const genBox = h('fieldset', {'data-field': 'dataset'}, h('legend', null, 'Generator parameters (blank: its default)'),
            GEN_PARAMS.map(([p, label, hint]) => DP.field(label, el('dataset.' + p, input('dataset.' + p)), hint)));
        el('partition.kind', h('select', {name: 'partition.kind'}, ['', 'natural', 'iid', 'dirichlet', 'classes'].map((k) =>
            h('option', {value: k}, k || 'the data set\'s own silos'))));
        const partBox = h('div', {class: 'form-row'},
            DP.field('Silos (partition)', el('partition.silos', input('partition.silos', {min: 1, step: 1}))),
            DP.field('Dirichlet α', el('partition.alpha', input('partition.alpha', {min: 0}))),
            DP.field('Classes per silo', el('partition.classes_per_silo', input('partition.classes_per_silo', {min: 1, step: 1}))));
        el('model.type', h('select', {name: 'model.type'}, ['linear', 'logistic', 'svm', 'softmax', 'mlp'].map((m) => h('option', {value: m}, m))));
        el('model.hidden', h('input', {name: 'model.hidden', type: 'text', placeholder: '64,32'}));
        el('rounds', input('rounds', {min: 1, step: 1, value: '20', required: true}));
        el('local_epochs', input('local_epochs', {min: 1, step: 1}));
        el('batch_size', input('batch_size', {min: 1, step: 1, value: '16'}));
        el('lr', input('lr', {value: '0.05'}));
        el('lambda', input('lambda', {value: '1'}));
        el('seed', input('seed', {min: 0, step: 1}));
        el('private', h('input', {name: 'private', type: 'checkbox', checked: true}));
        el('privacy.target_epsilon', input('privacy.target_epsilon', {value: '2'}));
        el('privacy.delta', input('privacy.delta', {value: '0.00001'}));
        el('privacy.clip', input('privacy.clip', {value: '1'}));
        el('privacy.client_rate', input('privacy.client_rate', {min: 0, max: 1}));
        el('on_budget_exhausted', h('select', {name: 'on_budget_exhausted'}, ['refuse', 'stop_silo', 'stop_job'].map((p) =>
            h('option', {value: p}, p))));
        el('extra', h('textarea', {name: 'extra', rows: 3, cols: 60, spellcheck: 'false', placeholder: '{"ratio": 0.5}'}));
        const bindBox = h('div', {'data-field': 'silos', class: 'bindings'});
        const privBox = h('fieldset', null, h('legend', null, 'Privacy (each silo\'s noise is calibrated to the target)'),
            DP.field('ε target over all rounds', f['privacy.target_epsilon']), DP.field('δ', f['privacy.delta'], 'of the unbound silos; a bound silo uses its budget\'s'),
            DP.field('Clipping norm', f['privacy.clip']), DP.field('Client sampling rate', f['privacy.client_rate'], 'dp_fedavg, ppsgd, fedhdp, dp_adaped; blank: 1'),
            h('h3', null, 'Silo binding'), h('p', {class: 'note'}, 'Which ledger silo pays for each of the data set\'s silos (the budgets page shows them).'),
            bindBox, DP.field('When a bound silo\'s budget runs out', f.on_budget_exhausted));
        const planBox = h('div', {'data-plan': '', 'aria-live': 'polite'});
        const planBtn = h('button', {type: 'button', 'data-action': 'plan'}, 'Plan (dry run)');
        const form = h('form', {class: 'launch', novalidate: true},
            h('div', {class: 'grid2'},
            h('fieldset', null, h('legend', null, 'Job'),
              DP.field('Name', f.name, 'optional'), DP.field('Algorithm', f.algorithm),
              DP.field('Rounds', f.rounds), DP.field('Local epochs', f.local_epochs, 'blank: 1'),
              DP.field('Batch size', f.batch_size), DP.field('Learning rate', f.lr),
              DP.field('λ (proximal weight)', f.lambda, 'mrmtl, ditto, fedhdp only'), DP.field('Seed', f.seed, 'blank: 0')),
            h('fieldset', null, h('legend', null, 'Data'),
              DP.field('Data set or generator', f.dataset), genBox,
              DP.field('Partition', f['partition.kind']), partBox)),
            h('div', {class: 'grid2'},
            h('fieldset', null, h('legend', null, 'Model and privacy'),
              DP.field('Model', f['model.type']), DP.field('Hidden widths (mlp)', f['model.hidden'], 'comma-separated'),
              DP.field('Train with differential privacy', f.private)),
            privBox),
            DP.field('More fields (JSON object merged into the spec)', f.extra, 'e.g. {"ratio": 0.5} for ppsgd, {"test_fraction": 0.3}'),
            h('p', null, planBtn, ' ', h('button', {type: 'submit', 'data-action': 'launch'}, 'Launch')),
            planBox, h('div', {'data-form-error': ''}));
        main.appendChild(form);

        /* the data set's silo names, as far as the form can tell, for the binding rows */
        const siloNames = () => {
            const kind = f['partition.kind'].value;
            const nPart = Number(f['partition.silos'].value);
            if (kind && kind !== 'natural')
                return nPart >= 1 ? Array.from({length: Math.min(nPart, 50)}, (_, i) => String(i)) : [];
            const d = datasets.find((x) => String(x.id) === f.dataset.value);
            if (!d)
                return [];
            if (d.kind === 'upload')
                return (d.silos || []).map((s) => s.name);
            if (d.kind === 'generator') {
                const p = (d.parameters || []).find((x) => x.name === 'silos');
                const n = Number(f['dataset.silos'].value) || (p ? p.default : 0);
                return Array.from({length: Math.min(n, 50)}, (_, i) => String(i));
            }
            return [];
        };
        const bound = new Map(); /* silo name -> ledger id kept across redraws */
        const drawBindings = () => {
            for (const c of bindBox.querySelectorAll('[data-bind]'))
                if (c.value)
                    bound.set(c.dataset.bind, c.value);
                else
                    bound.delete(c.dataset.bind);
            bindBox.textContent = '';
            const names = siloNames();
            if (!names.length) {
                bindBox.appendChild(h('p', {class: 'note'}, 'The silo names are known once the data set (or partition) is chosen.'));
                return;
            }
            for (const n of names) {
                const c = ledger
                    ? h('select', {'data-bind': n, 'data-field': 'silos.' + n},
                        h('option', {value: ''}, 'not bound'),
                        ledger.map((s) => h('option', {value: String(s.id)}, s.name + ' (#' + s.id + ')')))
                    : input('', {'data-bind': n, 'data-field': 'silos.' + n, min: 1, step: 1, placeholder: 'ledger silo id'});
                c.removeAttribute('name');
                c.value = bound.get(n) || '';
                bindBox.appendChild(DP.field('Data-set silo "' + n + '"', c));
            }
        };
        const sync = () => {
            const d = datasets.find((x) => String(x.id) === f.dataset.value);
            genBox.hidden = !(d && d.kind === 'generator');
            partBox.hidden = !f['partition.kind'].value || f['partition.kind'].value === 'natural';
            privBox.hidden = !f.private.checked;
            f['model.hidden'].closest('.field').hidden = f['model.type'].value !== 'mlp';
            f.lambda.closest('.field').hidden = !['mrmtl', 'ditto', 'fedhdp'].includes(f.algorithm.value);
            drawBindings();
        };
        form.addEventListener('change', (e) => {
            if (!e.target.hasAttribute('data-bind'))
                sync();
        });
        sync();

        /* The spec the form says: blank fields are left out (the daemon's defaults apply). */
        const spec = () => {
            const s = {};
            const num = (name) => {
                const c = f[name];
                if (c.closest('[hidden]') || c.value.trim() === '')
                    return undefined;
                const v = Number(c.value);
                return Number.isFinite(v) ? v : c.value; /* let the daemon name a bad value */
            };
            const put = (obj, key, v) => {
                if (v !== undefined)
                    obj[key] = v;
            };
            if (f.name.value.trim())
                s.name = f.name.value.trim();
            s.algorithm = f.algorithm.value;
            const d = datasets.find((x) => String(x.id) === f.dataset.value);
            if (d && d.kind === 'generator') {
                s.dataset = {generator: d.id};
                for (const [p] of GEN_PARAMS)
                    put(s.dataset, p, num('dataset.' + p));
            } else if (d) {
                s.dataset = d.id;
            }
            if (f['partition.kind'].value) {
                s.partition = {kind: f['partition.kind'].value};
                for (const p of ['silos', 'alpha', 'classes_per_silo'])
                    put(s.partition, p, num('partition.' + p));
            }
            s.model = {type: f['model.type'].value};
            if (s.model.type === 'mlp' && f['model.hidden'].value.trim())
                s.model.hidden = f['model.hidden'].value.split(',').map((x) => Number(x.trim()));
            for (const k of ['rounds', 'local_epochs', 'batch_size', 'lr', 'lambda', 'seed'])
                put(s, k, num(k));
            if (f.private.checked) {
                s.privacy = {};
                for (const k of ['target_epsilon', 'delta', 'clip', 'client_rate'])
                    put(s.privacy, k, num('privacy.' + k));
                const b = {};
                for (const c of bindBox.querySelectorAll('[data-bind]'))
                    if (c.value)
                        b[c.dataset.bind] = Number(c.value);
                if (Object.keys(b).length)
                    s.silos = b;
                if (f.on_budget_exhausted.value !== 'refuse')
                    s.on_budget_exhausted = f.on_budget_exhausted.value;
            }
            return s;
        };
        /* The spec with "More fields" merged; null (and the error shown) when that is not JSON. */
        const fullSpec = () => {
            const s = spec();
            const t = f.extra.value.trim();
            if (!t)
                return s;
            let x;
            try {
                x = JSON.parse(t);
            } catch (e) {
                x = null;
            }
            if (!x || typeof x !== 'object' || Array.isArray(x)) {
                DP.fieldErrors(form, {status: 400, body: {error: {code: 'invalid_argument', field: 'extra',
                    message: 'More fields must be a JSON object ({"key": value, ...})'}}});
                return null;
            }
            return Object.assign(s, x);
        };

        const showPlan = (p) => {
            planBox.textContent = '';
            const checks = new Map(p.budget_checks.map((c) => [c.silo, c]));
            planBox.appendChild(h('section', {class: 'card'},
                h('h2', null, 'Plan'),
                h('p', {'data-admitted': String(p.admitted)}, p.admitted
                    ? 'The daemon would accept this job now.'
                    : h('strong', null, 'The daemon would refuse this job now: ' + p.refusal.error.message)),
                h('table', {class: 'plan'},
                  h('caption', {class: 'note'}, p.rounds + ' rounds; privacy unit ' + (p.plan.privacy_unit || '–') + '; on a budget running out: ' + p.on_budget_exhausted),
                  h('thead', null, h('tr', null, ['Silo', 'Train / test rows', 'Noise multiplier', 'Planned ε', 'Ledger silo',
                      'Its ε if charged now', 'Its budget', 'Affordable'].map((t) => h('th', {scope: 'col'}, t)))),
                  h('tbody', null, (p.plan.silos || []).map((s) => {
                      const c = checks.get(s.name);
                      return h('tr', {'data-silo': s.name},
                          h('th', {scope: 'row'}, s.name),
                          h('td', {class: 'num'}, s.n_train + ' / ' + s.n_test),
                          h('td', {class: 'num'}, s.noise_multiplier === null ? '–' : DP.fmtNum(s.noise_multiplier)),
                          h('td', {class: 'num', 'data-eps': 'planned'}, s.epsilon === null ? '– (not private)' : DP.fmtEps(s.epsilon)),
                          h('td', null, s.silo_id ? '#' + s.silo_id : 'not bound'),
                          h('td', {class: 'num'}, c ? DP.fmtEps(c.would_be) : '–'),
                          h('td', {class: 'num'}, c ? DP.fmtEpsDown(c.budget) : '–'),
                          h('td', {'data-affordable': c ? String(c.affordable) : ''}, c ? (c.affordable ? 'yes' : h('strong', null, 'no')) : '–'));
                  })))));
        };
        planBtn.addEventListener('click', async () => {
            DP.fieldErrors(form, null);
            const s = fullSpec();
            if (!s)
                return;
            planBtn.disabled = true;
            planBox.textContent = 'Planning…';
            const a = await DP.api('POST', '/v1/jobs/plan', s);
            planBtn.disabled = false;
            if (!DP.alive(main))
                return;
            planBox.textContent = '';
            if (a.status === 200)
                showPlan(a.body);
            else
                DP.fieldErrors(form, a);
        });
        form.addEventListener('submit', async (ev) => {
            ev.preventDefault();
            DP.fieldErrors(form, null);
            const s = fullSpec();
            if (!s)
                return;
            const btn = form.querySelector('[data-action="launch"]');
            btn.disabled = true;
            const a = await DP.api('POST', '/v1/jobs', s);
            btn.disabled = false;
            if (!DP.alive(main))
                return;
            if (a.status === 202)
                DP.go('#/jobs/' + a.body.id);
            else
                DP.fieldErrors(form, a);
        });
    });
})();
