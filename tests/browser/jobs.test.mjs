// The job pages (web/jobs.js): the jobs list against GET /v1/jobs; a finished job's page (charts,
// the per-silo table's ε rounded up from the metrics', the spec); the launch form (a bad value's 400
// beside its field, for the dry run and the launch; the dry run's planned ε per silo); a job
// launched from the form watched live (its charts grow as rounds arrive, by server-sent events:
// EventSource without a token, fetch() streaming with one; by polling when the stream is down) and
// cancelled from its page.
// With --auth on only the live page is run again (module default below).
export const modes = ['off', 'on'];

const GEN = {generator: 'synthetic-linreg', silos: 3, dim: 3, n_min: 30, n_max: 40, seed: 5};
const PRIV = {target_epsilon: 2, delta: 1e-5, clip: 1};
// The job watched live: enough work per round (20 features, 300 rows per silo, 10 local epochs)
// that rounds arrive over seconds rather than thousands at once.
const SLOW_GEN = {generator: 'synthetic-linreg', silos: 3, dim: 20, n_min: 300, n_max: 300, seed: 5};
const SLOW_EPOCHS = 10;

async function until(t, what, fn, ms = 8000) {
    const t0 = Date.now();
    for (;;) {
        const v = await fn();
        if (v)
            return v;
        if (Date.now() - t0 > ms) {
            t.check(false, `timed out waiting for ${what}`);
            return null;
        }
        await new Promise((r) => setTimeout(r, 50));
    }
}

// A running job's page: live by server-sent events, its charts growing as rounds arrive, cancelled
// from its page.
async function watchAndCancel(t, id) {
    const {page} = t;
    if (!/^#\/jobs\//.test(await page.evaluate(() => location.hash)))
        await t.open('#/jobs/' + id);
    t.eq(await page.getAttribute('[data-live]', 'data-live'), 'events', 'live by server-sent events');
    const points = () => page.$eval('[data-chart="loss"]', (el) => Number(el.dataset.points)).catch(() => 0);
    const p1 = await until(t, 'a first round on the chart', async () => (await points()) || null);
    const p2 = await until(t, 'the chart to grow', async () => {
        const p = await points();
        return p > p1 ? p : null;
    });
    t.check(p2 > p1, `the charts grew as rounds arrived (${p1} then ${p2} rounds)`);
    const growing = await page.$eval('[data-chart="epsilon"] .chart', (el) => Array.from(el.dpChart.data[1]));
    t.check(growing.length >= p2 && growing.every((v, k) => k === 0 || v >= growing[k - 1]),
            `silo 0's ε is plotted for every round and never goes down (${growing.length} rounds)`);
    if (t.auth === 'off')
        await t.shot('job-running');
    if (t.auth === 'off') {
        // The fallback: with the event stream down (a 500), the page polls and still grows.
        t.allowHttpError(500, /\/events$/);
        await page.route(/\/v1\/jobs\/\d+\/events/, (r) => r.fulfill({status: 500, contentType: 'application/json',
            body: JSON.stringify({error: {code: 'internal', message: 'the test took the stream down', field: null, request_id: null}})}));
        // left and opened again inside the app: a reload would abort the page's requests in flight
        await t.navigate(() => page.evaluate(() => DP.go('#/jobs')));
        await t.navigate(() => page.evaluate((i) => DP.go('#/jobs/' + i), id));
        await page.waitForSelector('[data-live="polling"]');
        const q1 = await until(t, 'rounds on the chart', async () => (await points()) || null);
        const q2 = await until(t, 'the chart to grow by polling', async () => {
            const p = await points();
            return p > q1 ? p : null;
        });
        t.check(q2 > q1, `polling: the charts grew (${q1} then ${q2} rounds)`);
    }
    await page.click('[data-action="cancel"]');
    await page.waitForSelector('[data-live="ended"]', {timeout: 10000});
    const final = (await t.api('GET', '/v1/jobs/' + id)).body;
    t.eq(final.status, 'cancelled', 'the job was cancelled');
    t.log(`cancelled after ${final.rounds_done} rounds`);
    t.eq(await page.getAttribute('.job-head [data-status]', 'data-status'), 'cancelled', 'the page says cancelled');
    t.eq(await page.$eval('.job-head [data-progress] meter', (m) => m.value), final.rounds_done, 'progress is the API\'s');
    t.eq(await points(), final.rounds_done, 'every round is on the charts');
    const lastRound = (await t.api('GET', `/v1/jobs/${id}/metrics?after=${final.rounds_done - 1}`)).body.rounds[0];
    t.atLeastUp(await page.textContent('[data-silos] tr[data-silo="0"] [data-eps="epsilon"]'), lastRound.silos[0].epsilon,
                'silo 0: the ledger\'s ε after the last round');
}

export default async function (t) {
    const {page} = t;
    const shoot = t.auth === 'off';
    if (t.auth === 'on')
        await t.login();
    const silo = (await t.api('POST', '/v1/silos', {name: 'jobs-' + t.auth, budget: {epsilon: 40, delta: 1e-5}})).body;
    const SLOW = {algorithm: 'mrmtl', lambda: 1, dataset: SLOW_GEN, model: {type: 'linear'}, rounds: 100000,
                  local_epochs: SLOW_EPOCHS, batch_size: 8,
                  lr: 0.05, privacy: Object.assign({}, PRIV, {target_epsilon: 5}), silos: {0: silo.id}};
    if (t.auth === 'on') {
        // With a token only the way the events are read differs (fetch() with the Authorization
        // header instead of EventSource): the live page, its growth and cancel.
        const seen = [];
        page.on('request', (r) => seen.push({url: r.url(), auth: r.headers().authorization || ''}));
        const slow = await t.api('POST', '/v1/jobs', SLOW);
        t.eq(slow.status, 202, 'a long job is submitted');
        await watchAndCancel(t, slow.body.id);
        const streams = seen.filter((r) => /\/v1\/jobs\/\d+\/events/.test(r.url));
        t.check(streams.length > 0 && streams.every((r) => r.auth === 'Bearer ' + t.adminToken),
                `the event stream was read with the token in the Authorization header (${streams.length} reads)`);
        t.check(seen.every((r) => !r.url.includes(t.adminToken)), 'the token is in no URL');
        return;
    }

    // ---- a finished job
    const sub = await t.api('POST', '/v1/jobs', {name: 'finished', algorithm: 'mrmtl', lambda: 1, dataset: GEN,
        model: {type: 'linear'}, rounds: 6, batch_size: 8, lr: 0.05, seed: 1, privacy: PRIV, silos: {0: silo.id}});
    t.eq(sub.status, 202, 'a job is submitted');
    const done = await until(t, 'the job to end', async () => {
        const j = await t.api('GET', '/v1/jobs/' + sub.body.id);
        return j.body.status === 'succeeded' ? j.body : null;
    });

    // ---- the list: every job of the first page, its status and progress
    await t.open('#/jobs');
    await t.a11y('jobs list');
    const list = (await t.api('GET', '/v1/jobs?limit=20')).body.jobs;
    const rows = await page.$$eval('tr.job', (trs) => trs.map((tr) => ({
        id: tr.dataset.job, status: tr.querySelector('[data-status]').dataset.status,
        meter: tr.querySelector('[data-progress] meter').value, href: tr.querySelector('a').getAttribute('href')})));
    t.eq(rows.map((r) => r.id).join(','), list.map((j) => String(j.id)).join(','), 'every job is listed, by id');
    for (const [k, j] of list.entries()) {
        t.eq(rows[k].status, j.status, `job ${j.id}: status`);
        t.eq(rows[k].meter, j.rounds_done, `job ${j.id}: progress bar`);
        t.eq(rows[k].href, '#/jobs/' + j.id, `job ${j.id}: link`);
    }
    if (shoot)
        await t.shot('jobs');

    // ---- the finished job's page
    await t.navigate(() => page.click(`tr.job[data-job="${done.id}"] a`));
    await page.waitForSelector('[data-live="ended"]');
    await t.a11y('a finished job');
    const metrics = (await t.api('GET', `/v1/jobs/${done.id}/metrics`)).body.rounds;
    const last = metrics[metrics.length - 1];
    for (const key of ['loss', 'metric', 'epsilon']) {
        const plotted = await page.$eval(`[data-chart="${key}"] .chart`, (el) => el.dpChart.data.map((c) => Array.from(c)));
        t.eq(plotted[0].join(','), metrics.map((r) => r.round).join(','), `${key} chart: one point per round`);
        if (key === 'metric')
            t.eq(plotted[1].join(','), metrics.map((r) => r.global.test_mse).join(','), 'the global test MSE plotted is the API\'s');
        if (key === 'epsilon')
            t.eq(plotted[1].join(','), metrics.map((r) => r.silos[0].epsilon).join(','), 'silo 0\'s ε plotted is the ledger\'s');
    }
    for (const [k, s] of last.silos.entries()) {
        const row = `[data-silos] tr[data-silo="${s.silo}"]`;
        t.atLeastUp(await page.textContent(`${row} [data-eps="epsilon"]`), s.epsilon, `silo ${s.silo}: ε`);
        t.atLeastUp(await page.textContent(`${row} [data-eps="planned"]`), done.plan.silos[k].epsilon, `silo ${s.silo}: planned ε`);
        t.eq(await page.getAttribute(`${row} [data-stopped]`, 'data-stopped'), s.stopped ? 'yes' : 'no', `silo ${s.silo}: stopped`);
    }
    const spec = JSON.parse(await page.textContent('[data-spec] pre'));
    t.eq(JSON.stringify(spec), JSON.stringify(done.spec), 'the spec shown is the one launched');
    t.check(!(await page.$('[data-action="cancel"]')), 'no cancel button on a finished job');

    // ---- the launch form: a bad value's 400 beside its field (the dry run and the launch)
    await t.open('#/launch');
    await t.a11y('launch form');
    t.allowHttpError(400, /^\/v1\/jobs(\/plan)?$/);
    await page.selectOption('[name="dataset"]', 'synthetic-linreg');
    await page.fill('[name="dataset.silos"]', '3');
    await page.fill('[name="dataset.dim"]', '3');
    await page.fill('[name="dataset.n_min"]', '30');
    await page.fill('[name="dataset.n_max"]', '40');
    await page.dispatchEvent('[name="dataset.silos"]', 'change');
    await page.fill('[name="batch_size"]', '0');
    const fieldOf = () => page.$eval('form.launch .field-error', (e) => e.closest('.field').querySelector('[name], [data-field]').getAttribute('name'));
    for (const action of ['plan', 'launch']) {
        const [resp] = await Promise.all([
            page.waitForResponse((r) => /\/v1\/jobs(\/plan)?$/.test(new URL(r.url()).pathname)),
            page.click(`[data-action="${action}"]`)]);
        const err = (await resp.json()).error;
        t.eq(resp.status(), 400, `${action}: the daemon refuses batch_size 0`);
        await page.waitForSelector('form.launch .field-error');
        t.eq(await fieldOf(), 'batch_size', `${action}: the message is beside batch_size (the field the API names: ${err.field})`);
        t.eq(await page.textContent('form.launch .field-error'), err.message, `${action}: the API's message`);
        t.eq(await page.getAttribute('[name="batch_size"]', 'aria-invalid'), 'true', `${action}: batch_size is marked invalid`);
    }

    // ---- the dry run: every silo's planned ε, the bound silo's budget check
    await page.fill('[name="batch_size"]', '8');
    await page.fill('[name="rounds"]', '100000');
    for (const k of ['dim', 'n_min', 'n_max'])
        await page.fill(`[name="dataset.${k}"]`, String(SLOW_GEN[k]));
    await page.fill('[name="local_epochs"]', String(SLOW_EPOCHS));
    await page.fill('[name="privacy.target_epsilon"]', '5');
    await page.selectOption('[data-bind="0"]', String(silo.id));
    const [planResp] = await Promise.all([
        page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/jobs/plan'),
        page.click('[data-action="plan"]')]);
    const plan = await planResp.json();
    t.eq(planResp.status(), 200, 'the dry run answers');
    await page.waitForSelector('[data-plan] table.plan');
    t.check(!(await page.$('form.launch .field-error')), 'the previous error is gone');
    t.eq(await page.getAttribute('[data-admitted]', 'data-admitted'), 'true', 'the plan says the job would be admitted');
    t.eq(plan.budget_checks.length, 1, 'one bound silo checked');
    for (const s of plan.plan.silos)
        t.atLeastUp(await page.textContent(`[data-plan] tr[data-silo="${s.name}"] [data-eps="planned"]`), s.epsilon, `plan: silo ${s.name}'s ε`);
    t.eq(await page.getAttribute('[data-plan] tr[data-silo="0"] [data-affordable]', 'data-affordable'), 'true', 'silo 0 can afford it');
    const jobsBefore = (await t.api('GET', '/v1/jobs?limit=200')).body.jobs.length;
    t.eq(jobsBefore, list.length, 'the dry run stored no job');
    if (shoot)
        await t.shot('launch');

    // ---- launch it, watch it live, cancel it
    const kinds = [];
    page.on('request', (r) => {
        if (/\/v1\/jobs\/\d+\/events/.test(r.url()))
            kinds.push(r.resourceType());
    });
    await t.navigate(() => page.click('[data-action="launch"]'));
    t.check(/^#\/jobs\/\d+$/.test(await page.evaluate(() => location.hash)), 'the launch leads to the job\'s page');
    await watchAndCancel(t, Number((await page.evaluate(() => location.hash)).split('/').pop()));
    t.check(kinds.includes('eventsource'), `without a token the page reads the events with EventSource (${[...new Set(kinds)]})`);
}
