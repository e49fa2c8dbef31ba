// The calculators: each figure shown is the API's for the same request (rounded on the safe side),
// the ε curve's points are the API's ε after that many steps, and a bad value gets the API's 400
// message beside the field it names.
// Run with tokens on, and no token given: the calculators are open.
export const modes = ['on'];

const dpsgd = (q, sigma, steps) => ({type: 'self_composed', count: steps,
    event: {type: 'poisson_sampled', sampling_rate: q, event: {type: 'gaussian', noise_multiplier: sigma}}});
const val = async (page, form, name) => Number(await page.inputValue(`${form} [name="${name}"]`));

export default async function (t) {
    const {page} = t;
    await t.open('#/calculators'); // no token even with --auth on: the calculators are open
    await t.a11y('calculators');

    // ε of DP-SGD, from the form's own values.
    const F = '#calc-epsilon';
    const q = await val(page, F, 'sampling_rate'), s = await val(page, F, 'noise_multiplier');
    const T = await val(page, F, 'steps'), d = await val(page, F, 'delta');
    const one = await t.api('POST', '/v1/accounting/epsilon', {event: dpsgd(q, s, T), delta: d, accountant: 'rdp'});
    t.eq(one.status, 200, 'the API computes ε');
    t.atLeastUp(await page.textContent(`${F} ~ .result [data-result="epsilon"] .figure`), one.body.epsilon, 'ε of the run');
    const curve = await page.$eval('#epsilon-chart', (el) => el.dpChart.data.map((c) => Array.from(c)));
    t.eq(curve[0][curve[0].length - 1], T, 'the curve ends at T');
    t.eq(curve[1][curve[1].length - 1], one.body.epsilon, 'the curve ends at the run\'s ε');
    for (const k of [0, Math.floor(curve[0].length / 2)]) {
        const a = await t.api('POST', '/v1/accounting/epsilon', {event: dpsgd(q, s, curve[0][k]), delta: d, accountant: 'rdp'});
        t.eq(curve[1][k], a.body.epsilon, `the curve at ${curve[0][k]} steps`);
    }
    t.check(curve[1].every((v, k) => k === 0 || v >= curve[1][k - 1]), 'ε grows with the steps');
    await t.shot('calculators');

    // A bad value: the 400 is beside the noise multiplier.
    t.allowHttpError(400, /^\/v1\/accounting\/epsilon$/);
    await page.fill(`${F} [name="noise_multiplier"]`, '-1');
    await page.press(`${F} [name="noise_multiplier"]`, 'Enter');
    await page.waitForSelector(`${F} .field-error`);
    const bad = await t.api('POST', '/v1/accounting/epsilon', {event: dpsgd(q, -1, T), delta: d, accountant: 'rdp'});
    t.eq(await page.textContent(`${F} .field-error`), bad.body.error.message, 'the API\'s message');
    const errField = await page.$eval(`${F} .field-error`, (e) => e.closest('.field').querySelector('input').name);
    t.eq(errField, 'noise_multiplier', `beside the field the API names (${bad.body.error.field})`);

    // Calibration: σ for the target, shown rounded up; then the steps.
    const C = '#calc-calibrate';
    const target = await val(page, C, 'target_epsilon'), cd = await val(page, C, 'delta');
    const cq = await val(page, C, 'sampling_rate'), cT = await val(page, C, 'steps'), cs = await val(page, C, 'noise_multiplier');
    const cal = await t.api('POST', '/v1/accounting/calibrate', {event: dpsgd(cq, null, cT), target_epsilon: target, delta: cd});
    const shownSigma = Number(await page.textContent(`${C} ~ .result [data-result="noise_multiplier"] .figure`));
    t.check(shownSigma >= cal.body.noise_multiplier && shownSigma - cal.body.noise_multiplier < 1e-5 * cal.body.noise_multiplier,
            `σ shown ${shownSigma} is the API's ${cal.body.noise_multiplier}, rounded up`);
    t.atLeastUp(await page.textContent(`${C} ~ .result [data-result="epsilon"] .figure`), cal.body.epsilon, 'achieved ε');
    t.check(cal.body.epsilon <= target, 'the achieved ε meets the target');
    await page.selectOption(`${C} [name="solve"]`, 'count');
    t.check(await page.isDisabled(`${C} [name="steps"]`), 'the unknown is not an input');
    await page.click(`${C} button[type="submit"]`);
    await page.waitForSelector(`${C} ~ .result [data-result="count"]`);
    const calT = await t.api('POST', '/v1/accounting/calibrate', {event: dpsgd(cq, cs, null), target_epsilon: target, delta: cd});
    t.eq(Number(await page.textContent(`${C} ~ .result [data-result="count"] .figure`)), calT.body.count, 'steps T');

    // The price of a search.
    const P = '#calc-tuning';
    const body = {event: dpsgd(await val(page, P, 'sampling_rate'), await val(page, P, 'noise_multiplier'), await val(page, P, 'steps')),
                  distribution: {geometric: {mean: await val(page, P, 'mean')}}, delta: await val(page, P, 'delta'),
                  grid_size: await val(page, P, 'grid_size')};
    const cost = await t.api('POST', '/v1/tuning/cost', body);
    t.eq(cost.status, 200, 'the API prices the search');
    for (const k of ['epsilon', 'epsilon_one_run', 'epsilon_naive'])
        t.atLeastUp((await page.textContent(`${P} ~ .result [data-result="${k}"] .meter-text`)).split(' ')[1], cost.body[k], k);
    t.check(cost.body.epsilon < cost.body.epsilon_naive, 'the search costs less than the naive grid');
    // A distribution's bad mean, beside the mean.
    t.allowHttpError(400, /^\/v1\/tuning\/cost$/);
    await page.fill(`${P} [name="mean"]`, '0.5');
    await page.click(`${P} button[type="submit"]`);
    await page.waitForSelector(`${P} .field-error`);
    const badCost = await t.api('POST', '/v1/tuning/cost', Object.assign({}, body, {distribution: {geometric: {mean: 0.5}}}));
    t.eq(await page.textContent(`${P} .field-error`), badCost.body.error.message, 'the mean\'s 400');
    t.eq(await page.$eval(`${P} .field-error`, (e) => e.closest('.field').querySelector('input').name), 'mean',
         `beside the mean (${badCost.body.error.field})`);
}
