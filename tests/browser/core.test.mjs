// The DP core of web/app.js, in the page, against the daemon: the rounding rules, DP.api and
// DP.pageAll against the API's own answers, DP.fieldErrors on a real 400, DP.stream on a real job's
// event stream, DP.h's refusal of raw HTML.
export default async function (t) {
    const {page} = t;
    await t.open('#/calculators');

    // Rounding: never under (fmtEps) or over (fmtEpsDown) the exact value, and within one unit of
    // the 4th significant digit; the figures are the ledger's own (a charge's cost and totals).
    const silo = await t.api('POST', '/v1/silos', {name: 'core', budget: {epsilon: 60, delta: 1e-7}});
    const costs = [];
    for (const sigma of [1.3, 2.9, 8.1, 40.3, 301.7]) {
        const c = await t.api('POST', `/v1/silos/${silo.body.id}/charges`, {event: {type: 'gaussian', noise_multiplier: sigma}});
        costs.push(c.body.cost.epsilon, c.body.totals_after.spent_epsilon, c.body.totals_after.remaining_epsilon);
    }
    const shown = await page.evaluate((xs) => xs.map((x) => [DP.fmtEps(x), DP.fmtEpsDown(x)]), costs);
    costs.forEach((x, i) => {
        t.atLeastUp(shown[i][0], x, `fmtEps(${x})`);
        t.atMostDown(shown[i][1], x, `fmtEpsDown(${x})`);
    });
    t.eq(JSON.stringify(await page.evaluate(() => [DP.fmtEps(null), DP.fmtEps(Infinity), DP.fmtEps(0)])),
         JSON.stringify(['∞', '∞', '0']), 'unbounded and zero');

    // DP.pageAll follows next_after over every page: the same silos as one big page.
    const all = (await t.api('GET', '/v1/silos?limit=1000')).body.silos.map((s) => s.id);
    const paged = await page.evaluate(async () => (await DP.pageAll('/v1/silos', 'silos')).items.map((s) => s.id));
    t.eq(paged.join(','), all.join(','), 'DP.pageAll');

    // DP.fieldErrors: a real 400 lands beside the control whose data-field is the longest prefix of
    // the field path, and a later success clears it.
    t.allowHttpError(400, /^\/v1\/accounting\/epsilon$/);
    const body = {delta: 1e-5, event: {type: 'self_composed', count: 10, event: {type: 'gaussian', noise_multiplier: -2}}};
    const placed = await page.evaluate(async (b) => {
        const form = DP.h('form', {id: 'probe'},
            DP.field('Event', DP.h('input', {name: 'ev', 'data-field': 'event'})),
            DP.field('Noise', DP.h('input', {name: 'sigma', 'data-field': 'event.event.noise_multiplier'})),
            DP.field('δ', DP.h('input', {name: 'delta'})));
        document.getElementById('main').appendChild(form);
        const a = await DP.api('POST', '/v1/accounting/epsilon', b);
        const beside = DP.fieldErrors(form, a);
        const where = form.querySelector('.field-error').closest('.field').querySelector('input').name;
        const text = form.querySelector('.field-error').textContent;
        const invalid = form.querySelector('[name="sigma"]').getAttribute('aria-invalid');
        DP.fieldErrors(form, {status: 200, body: {}});
        return {beside, where, text, invalid, left: form.querySelectorAll('.field-error, [aria-invalid]').length};
    }, body);
    const want = await t.api('POST', '/v1/accounting/epsilon', body);
    t.eq(want.body.error.field, 'event.event.noise_multiplier', 'the API names the nested field');
    t.eq(JSON.stringify(placed), JSON.stringify({beside: true, where: 'sigma', text: want.body.error.message,
                                                 invalid: 'true', left: 0}), 'DP.fieldErrors');

    // DP.stream reads a job's server-sent events with the token in a header: the same events, in
    // order, as the API sends to a plain client.
    const job = await t.api('POST', '/v1/jobs', {algorithm: 'fedavg', dataset: {generator: 'synthetic-linreg'},
        model: {type: 'linear'}, rounds: 3, batch_size: 16, lr: 0.05, privacy: {target_epsilon: 1, delta: 1e-5, clip: 1}});
    t.eq(job.status, 202, 'a small job');
    // The daemon answers what it has and asks the client to come back (retry: 1000) until the
    // job's `end`; DP.stream must follow it to the end as EventSource would.
    const got = await page.evaluate(async (id) => {
        const evs = [];
        // What each answer of the stream held, seen through a copy of its body.
        const answers = [];
        const realFetch = window.fetch;
        window.fetch = async (...a) => {
            const r = await realFetch(...a);
            if (/\/events$/.test(String(a[0])))
                answers.push(r.status === 200 ? r.clone().text() : Promise.resolve(`status ${r.status}`));
            return r;
        };
        const s = DP.stream(`/v1/jobs/${id}/events`, (e) => evs.push(e));
        const status = await Promise.race([s.done, new Promise((res) => setTimeout(() => res('timeout'), 20000))]);
        const texts = await Promise.all(answers.map((x) => x.catch((e) => `unread: ${e.name}`)));
        s.close();
        window.fetch = realFetch;
        return {status, evs, texts};
    }, job.body.id);
    t.eq(got.status, 200, 'the stream was followed to its end event');
    t.eq(got.evs.length ? got.evs[got.evs.length - 1].event : null, 'end', 'the last event is end');
    const raw = await (await fetch(`${t.base}/v1/jobs/${job.body.id}/events`)).text();
    const ids = [...raw.matchAll(/^id: (\S+)$/gm)].map((m) => m[1]);
    t.check(ids.length >= 5, `the job's stream has its events (${ids.length})`);
    t.eq(got.evs.filter((e) => e.id !== null).map((e) => e.id).join(','), ids.join(','), 'DP.stream: the same events');
    t.check(got.evs.some((e) => e.event === 'round' && JSON.parse(e.data).round === 3), 'DP.stream: the rounds, parsed');
    // However many answers it took (the job may end before the first), each asked only for what was
    // new (Last-Event-ID): no event twice, and only the last answer holds `end`.
    const texts = got.texts;
    t.log(`the stream took ${texts.length} answer(s)`);
    const seen = texts.flatMap((x) => [...x.matchAll(/^id: (\S+)$/gm)].map((m) => m[1]));
    t.eq(seen.join(','), ids.join(','), 'the answers hold each event once');
    t.check(texts.length >= 1 && texts.every((x, i) => x.includes('event: end') === (i === texts.length - 1)),
            'only the last answer ends the stream');

    // DP.h never takes raw HTML.
    t.eq(await page.evaluate(() => {
        try {
            DP.h('div', {html: '<b>x</b>'});
            return 'accepted';
        } catch (e) {
            return 'refused';
        }
    }), 'refused', 'DP.h refuses html');
}
