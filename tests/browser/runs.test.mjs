// Estimator runs: the list is the API's (page by page), and a run's page shows its raw and
// personalised estimates and their shrinkage as the API stored them, plotted raw against
// personalised; a run that kept no data says so, and so does one that kept no estimates.

const near = (shown, exact) => Math.abs(Number(shown) - exact) <= 5e-4 * Math.max(Math.abs(exact), 1e-12);

export default async function (t) {
    const {page} = t;
    const post = async (kind, body) => {
        const a = await t.api('POST', `/v1/estimators/${kind}`, body);
        t.eq(a.status, 201, `a ${kind} run`);
        return a.body.run_id;
    };
    const g = await post('gaussian', {keep_data: true, keep_results: true, noise_variance: 0.25, clients: [
        {id: 'a', mean: 0.31, n: 15}, {id: 'b', mean: 0.12, n: 8}, {id: 'c', mean: 0.55, n: 30}, {id: 'd', mean: -0.05, n: 4}]});
    const b = await post('beta', {keep_data: true, keep_results: true, method: 'moments', clients: [
        {id: 'a', successes: 3, trials: 10}, {id: 'b', successes: 7, trials: 12}, {id: 'c', successes: 1, trials: 8},
        {id: 'd', successes: 5, trials: 10}, {id: 'e', samples: [1, 0, 0, 1, 1, 1]}]});
    const hidden = await post('mixture', {keep_results: true, noise_variance: 0.25, components: 2, clients: [
        {mean: -1.1, n: 10}, {mean: -0.9, n: 10}, {mean: 1.0, n: 10}, {mean: 1.2, n: 10}, {mean: 0.9, n: 10}]});

    // The list, two runs a page, through the "Next page" links.
    await t.open('#/runs?limit=2');
    await t.a11y('runs list');
    let after = 0, n = 0;
    for (let pages = 0; pages < 10; pages++) {
        const want = (await t.api('GET', `/v1/runs?limit=2${after ? '&after=' + after : ''}`)).body;
        const got = await page.$$eval('table.runs tbody tr', (trs) => trs.map((tr) => [Number(tr.dataset.run),
            tr.querySelector('[data-status]').textContent]));
        t.eq(JSON.stringify(got), JSON.stringify(want.runs.map((r) => [r.id, r.status])), `page ${pages + 1} of the runs`);
        n += got.length;
        if (want.next_after === null)
            break;
        await t.navigate(() => page.click('a[rel="next"]'));
        after = want.next_after;
    }
    t.check(n >= 3, `the runs are listed (${n})`);

    // A run with its data: the table and the plot are the API's figures.
    for (const id of [g, b]) {
        const run = (await t.api('GET', `/v1/runs/${id}`)).body;
        await t.go(`#/runs/${id}`);
        const rows = await page.$$eval('table.estimates tbody tr', (trs) => trs.map((tr) => ({
            raw: tr.querySelector('[data-raw]').textContent, post: tr.querySelector('[data-post]').textContent,
            sh: tr.querySelector('[data-shrinkage]').textContent})));
        const est = run.outputs.estimates;
        t.eq(rows.length, est.length, `run ${id}: one row per client`);
        const raws = run.inputs.clients.map((c) => c.mean !== undefined ? c.mean : c.successes !== undefined
            ? c.successes / c.trials : c.samples.reduce((p, q) => p + q, 0) / c.samples.length);
        for (let i = 0; i < Math.min(rows.length, est.length); i++) {
            t.check(near(rows[i].raw, raws[i]), `run ${id} client ${i}: raw ${rows[i].raw} vs ${raws[i]}`);
            t.check(near(rows[i].post, est[i].posterior_mean), `run ${id} client ${i}: personalised ${rows[i].post} vs ${est[i].posterior_mean}`);
            t.check(near(rows[i].sh, est[i].shrinkage), `run ${id} client ${i}: shrinkage ${rows[i].sh} vs ${est[i].shrinkage}`);
        }
        const plotted = await page.$eval('#shrink-chart', (el) => el.dpChart.data.map((c) => Array.from(c)));
        const pairs = raws.map((r, i) => [r, est[i].posterior_mean]).sort((p, q) => p[0] - q[0]);
        t.eq(JSON.stringify(plotted[0]), JSON.stringify(pairs.map((p) => p[0])), `run ${id}: x = the raw estimates`);
        t.eq(JSON.stringify(plotted[1]), JSON.stringify(pairs.map((p) => p[1])), `run ${id}: y = the personalised ones`);
        const sh = await page.$eval('#shrinkage-chart', (el) => el.dpChart.data.map((c) => Array.from(c)));
        const ns = run.inputs.clients.map((c) => c.n !== undefined ? c.n : c.trials !== undefined ? c.trials : c.samples.length);
        const byN = ns.map((x, i) => [x, est[i].shrinkage]).sort((p, q) => p[0] - q[0]);
        t.eq(JSON.stringify(sh), JSON.stringify([byN.map((p) => p[0]), byN.map((p) => p[1])]),
             `run ${id}: the shrinkage plot is the API's shrinkage against n`);
        await t.a11y(`run ${id}`);
        if (id === g)
            await t.shot('run');
    }

    // A run that kept no data: no raw column, no plot, and it says why.
    await t.go(`#/runs/${hidden}`);
    t.check(await page.isVisible('[data-no-raw]'), 'a run without its data says the raw estimates are not stored');
    t.eq(await page.$('#shrink-chart'), null, 'and draws no raw-against-personalised plot');
    const hiddenRun = (await t.api('GET', `/v1/runs/${hidden}`)).body;
    const sh = await page.$eval('#shrinkage-chart', (el) => Array.from(el.dpChart.data[1]));
    t.eq(JSON.stringify(sh), JSON.stringify(hiddenRun.outputs.estimates.map((e) => e.shrinkage).sort((p, q) => p - q)),
         'its shrinkage is plotted in increasing order');

    // A run that kept its fit alone (the default): it says so, and shows the fit.
    const fitOnly = await post('gaussian', {noise_variance: 0.25, clients: [{mean: 0.3, n: 5}, {mean: 0.1, n: 5}, {mean: 0.6, n: 5}]});
    await t.go(`#/runs/${fitOnly}`);
    t.check(await page.isVisible('[data-not-kept]'), 'a run that kept no estimates says so');
    t.check((await page.textContent('[data-prior]')).length > 0, 'and shows its prior');
    t.eq(await page.$('table.estimates'), null, 'and shows no table of estimates');

    // A private run that charged two silos: its privacy and the silos it charged, linked.
    const s1 = (await t.api('POST', '/v1/silos', {name: 'clinic-1', budget: {epsilon: 5, delta: 1e-5}})).body.id;
    const s2 = (await t.api('POST', '/v1/silos', {name: 'clinic-2', budget: {epsilon: 5, delta: 1e-5}})).body.id;
    const priv = await post('beta', {method: 'moments', privacy: {epsilon0: 1, scheme: 'two_bit'}, clients: [
        {successes: 3, trials: 10, silo_id: s1}, {successes: 7, trials: 12, silo_id: s2}, {successes: 1, trials: 8, silo_id: s1},
        {successes: 5, trials: 10}]});
    const pr = (await t.api('GET', `/v1/runs/${priv}`)).body;
    await t.go(`#/runs/${priv}`);
    const links = await page.$$eval('main .card a[href^="#/silos/"]', (as) => as.map((a) => a.getAttribute('href')));
    t.eq(links.join(','), pr.outputs.privacy.charges.map((c) => `#/silos/${c.silo_id}`).join(','), 'the silos the run charged');
    t.check((await page.textContent('main .card')).includes(`ε₀ = ${pr.outputs.privacy.epsilon0}`), 'its ε₀');

    // An unknown run is the API's 404.
    t.allowHttpError(404, /^\/v1\/runs\/999999$/);
    await t.go('#/runs/999999');
    t.check((await page.textContent('.error')).includes('run 999999 does not exist'), 'an unknown run is said');
}
