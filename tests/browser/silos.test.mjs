// The silos list: every silo the API lists is shown with its budget, spent, reserved and remaining
// (bars and numbers: spent and reserved rounded up, remaining down) and its accountant.
export const modes = ['off', 'on'];

const EPOCH = {type: 'self_composed', count: 400, event: {type: 'poisson_sampled', sampling_rate: 0.01,
               event: {type: 'gaussian', noise_multiplier: 1.1}}};

export default async function (t) {
    const {page} = t;
    const mk = async (name, budget) => {
        const a = await t.api('POST', '/v1/silos', {name, budget}); // each --auth mode has its own daemon
        t.eq(a.status, 201, `silo ${name} created`);
        return a.body;
    };
    const a = await mk('hospital-a', {epsilon: 3, delta: 1e-5});
    const z = await mk('registry-b', {rho: 0.5});
    await mk('clinic-c', {private: false});
    t.eq((await t.api('POST', `/v1/silos/${a.id}/charges`, {event: EPOCH, job_id: 3, reason: 'epoch'})).status, 201, 'charge');
    t.eq((await t.api('POST', `/v1/silos/${a.id}/claims`, {event: {type: 'gaussian', noise_multiplier: 9},
                                                        timeout_ms: 600000})).status, 201, 'claim');
    t.eq((await t.api('POST', `/v1/silos/${z.id}/charges`, {event: {type: 'gaussian', noise_multiplier: 3}})).status,
         201, 'zCDP charge');

    if (t.auth === 'on') {
        // Without a token the page shows the API's 401 and says what to do.
        t.allowHttpError(401, /^\/v1\/silos$/);
        await t.open('#/silos');
        t.check(await page.isVisible('.error >> text=Bearer token'), 'a 401 tells the user to set a token');
        await page.fill('#token', t.adminToken);
        await t.navigate(() => page.press('#token', 'Enter'));
    } else {
        await t.open('#/silos');
    }
    const api = await t.api('GET', '/v1/silos?limit=1000');
    const shown = await page.$$eval('li.silo', (els) => els.map((e) => e.dataset.silo));
    t.eq(shown.join(','), api.body.silos.map((s) => String(s.id)).join(','), 'every silo is shown, in order');
    for (const s of api.body.silos) {
        const card = `li.silo[data-silo="${s.id}"]`;
        const text = async (sel) => (await page.textContent(`${card} ${sel}`)).trim();
        t.eq(await text('h2 a'), s.name, `silo ${s.id}: name`);
        const acc = s.accounting.accountant + (s.accounting.conversion ? ` (${s.accounting.conversion})` : '');
        t.eq(await text('[data-accountant]'), acc, `silo ${s.id}: accountant`);
        const unit = typeof s.budget.epsilon === 'number' ? 'epsilon' : typeof s.budget.rho === 'number' ? 'rho' : null;
        if (!unit) {
            t.check((await text('')).includes('Opted out'), `silo ${s.id}: opted out is said`);
            continue;
        }
        const fig = async (name) => (await text(`[data-figure="${name}"] .meter-text`)).split(' of ')[0];
        t.atLeastUp(await fig('spent'), s.spent[unit], `silo ${s.id}: spent`);
        t.atLeastUp(await fig('reserved'), s.reserved[unit], `silo ${s.id}: reserved`);
        t.atMostDown(await fig('remaining'), s.remaining[unit], `silo ${s.id}: remaining`);
        t.atLeastUp(await text('[data-figure="budget"] .figure'), s.budget[unit], `silo ${s.id}: budget`);
        const meter = await page.$eval(`${card} [data-figure="spent"] meter`, (m) => [m.value, m.max]);
        t.check(Math.abs(meter[0] - s.spent[unit]) < 1e-12 && meter[1] === s.budget[unit], `silo ${s.id}: the spent bar`);
    }
    t.check(api.body.silos.some((s) => s.reserved.active_claims === 1 && s.reserved.epsilon > 0), 'a silo has a claim');
    if (t.auth === 'off') {
        await t.shot('silos');
        return;
    }
    // With a silo's own token: the list is the admin's (the API's 403, said), and the page offers to
    // open the token's silo, whose figures are the API's for that token; another silo's is a 403.
    const listed = await t.api('GET', '/v1/silos', undefined, {token: a.token});
    t.eq(listed.status, 403, 'a silo token may not list the silos');
    const mine = (await t.api('GET', `/v1/silos/${a.id}`, undefined, {token: a.token})).body;
    t.allowHttpError(403, /^\/v1\/silos(\/\d+)?$/);
    await t.login(a.token);
    await t.open('#/silos');
    t.check((await page.textContent('.error')).includes('HTTP 403'), 'with a silo token: the list\'s 403 is said');
    await page.fill('#open-silo input[name="silo_id"]', String(a.id));
    await t.navigate(() => page.press('#open-silo input[name="silo_id"]', 'Enter'));
    t.eq((await page.textContent('h1 [data-name]')).trim(), mine.name, 'with a silo token: its own silo opens');
    t.atLeastUp((await page.textContent('[data-figure="spent"] .meter-text')).split(' of ')[0], mine.spent.epsilon,
                'with a silo token: spent');
    await t.open(`#/silos/${z.id}`);
    t.check((await page.textContent('.error')).includes('HTTP 403'), 'another silo\'s page: the API\'s 403, said');
}
