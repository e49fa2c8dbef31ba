// The shell: the first load stays under 200 KB, every section of the nav is reachable by keyboard,
// and the token typed into the token field lives in session storage only (never in the URL).
export const modes = ['off', 'on'];

export default async function (t) {
    const {page} = t;
    const sizes = [];
    const count = (resp) => sizes.push(resp.body().then((b) => b.length, () => 0));
    if (t.auth === 'on')
        t.allowHttpError(401, /^\/v1\//); // no token yet: the pages say so
    page.on('response', count);
    await t.open('');
    await page.waitForLoadState('networkidle');
    page.off('response', count);
    const bytes = (await Promise.all(sizes)).reduce((a, b) => a + b, 0);
    t.log(`first load: ${bytes} bytes`);
    t.check(bytes > 0 && bytes < 200 * 1024, `first load is under 200 KB (got ${bytes} bytes)`);

    // Keyboard: Tab from the top reaches the skip link, then each nav link in order; Enter follows
    // a link and moves the focus to the page.
    await page.keyboard.press('Tab');
    t.eq(await page.evaluate(() => document.activeElement.id), 'skip', 'the first Tab stop is the skip link');
    const want = ['Silos', 'Jobs', 'Launch', 'Calculators', 'Estimator runs'];
    for (const label of want) {
        await page.keyboard.press('Tab');
        t.eq(await page.evaluate(() => document.activeElement.textContent), label, 'Tab reaches the nav link');
    }
    for (let k = 0; k < want.length - 1; k++)
        await page.keyboard.press('Shift+Tab');
    await t.navigate(() => page.keyboard.press('Enter'));
    t.check(page.url().endsWith('#/silos'), `Enter on "Silos" navigates (at ${page.url()})`);
    t.eq(await page.getAttribute('[data-nav="silos"]', 'aria-current'), 'page', 'the current section is marked');
    t.eq(await page.evaluate(() => document.activeElement.id), 'main', 'the focus moves to the page');

    // The token: the field's value goes to session storage and into the Authorization header of the
    // page's calls, never into a URL.
    const token = t.auth === 'on' ? t.adminToken : 'dps_not_a_real_token';
    const urls = [];
    const auths = [];
    page.on('request', (r) => {
        urls.push(r.url());
        if (r.url().includes('/v1/'))
            auths.push(r.headers().authorization || '');
    });
    await page.fill('#token', token);
    await t.navigate(() => page.press('#token', 'Enter'));
    await page.waitForLoadState('networkidle');
    t.eq(await page.evaluate(() => sessionStorage.getItem('dpsilo.token')), token, 'the token is in session storage');
    t.eq(await page.evaluate(() => localStorage.length), 0, 'nothing in local storage');
    t.check(urls.length > 0 && urls.every((u) => !u.includes(token)), 'the token is in no URL');
    if (t.auth === 'on')
        t.check(auths.length > 0 && auths.every((a) => a === 'Bearer ' + token), 'the page sends the token as a bearer');
    await page.click('#token-clear');
    t.eq(await page.evaluate(() => sessionStorage.getItem('dpsilo.token')), null, '"Forget" removes the token');
}
