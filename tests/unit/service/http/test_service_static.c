/*
 * Unit tests for service/http/static.c: the whitelist serves exactly the embedded files, with the
 * right content types, and no spelling of a traversal can reach anything else.
 */
#include "tests/support/test_util.h"

#include <string.h>

#include "service/http/static.h"

static const embed_file FILES[] = {
    {"index.html", (const unsigned char *)"<p>hi</p>", 9},
    {"app.js", (const unsigned char *)"1;", 2},
    {"style.css", (const unsigned char *)"p{}", 3},
    {"logo.svg", (const unsigned char *)"<svg/>", 6},
    {"notes.md", (const unsigned char *)"# x", 3}, /* no whitelisted type: never served */
    {".hidden.html", (const unsigned char *)"x", 1},
};
#define NF (sizeof FILES / sizeof FILES[0])

static void root_and_names_are_served_with_types(void **state)
{
    (void)state;
    http_static_file f;
    assert_true(http_static_lookup(FILES, NF, "/", &f));
    assert_int_equal(f.len, 9);
    assert_string_equal(f.content_type, "text/html; charset=utf-8");
    assert_true(http_static_lookup(FILES, NF, "/index.html", &f));
    assert_true(http_static_lookup(FILES, NF, "/app.js", &f));
    assert_string_equal(f.content_type, "text/javascript; charset=utf-8");
    assert_true(http_static_lookup(FILES, NF, "/style.css", &f));
    assert_string_equal(f.content_type, "text/css; charset=utf-8");
    assert_true(http_static_lookup(FILES, NF, "/logo.svg", &f));
    assert_string_equal(f.content_type, "image/svg+xml");
}

static void unknown_types_and_dotfiles_are_not_served(void **state)
{
    (void)state;
    http_static_file f;
    assert_false(http_static_lookup(FILES, NF, "/notes.md", &f));
    assert_false(http_static_lookup(FILES, NF, "/.hidden.html", &f));
    assert_null(http_static_content_type("Makefile"));
    assert_null(http_static_content_type(".bashrc"));
}

static void traversal_spellings_never_match(void **state)
{
    (void)state;
    /* MHD hands us the percent-decoded path, so both raw and decoded spellings are listed. */
    const char *attacks[] = {
        "/../Makefile",
        "/..%2fMakefile",
        "/%2e%2e/Makefile",
        "/%2e%2e%2fMakefile",
        "//etc/passwd",
        "/./index.html",
        "/web/../index.html",
        "/index.html/",
        "/index.html/..",
        "/..\\Makefile",
        "/index.html%00.js",
        "/INDEX.HTML",
        "/../../../../etc/passwd",
        "/..",
        "/.",
        "",
        "index.html",
        "/index.html?x",
        "/%69ndex.html",
        "/app.js/../../etc/passwd",
    };
    http_static_file f;
    for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++)
        if (http_static_lookup(FILES, NF, attacks[i], &f))
            fail_msg("served %s", attacks[i]);
}

static void the_real_web_directory_has_an_index(void **state)
{
    (void)state;
    http_static_file f;
    assert_true(http_static_lookup(EMBED_WEB, EMBED_WEB_N, "/", &f));
    assert_true(f.len > 0);
    assert_string_equal(f.content_type, "text/html; charset=utf-8");
    /* Every embedded file either has a whitelisted type or is refused: none is served by accident.
     */
    for (size_t i = 0; i < EMBED_WEB_N; i++) {
        char p[128];
        snprintf(p, sizeof p, "/%s", EMBED_WEB[i].name);
        bool served = http_static_lookup(EMBED_WEB, EMBED_WEB_N, p, &f);
        assert_int_equal(served, http_static_content_type(EMBED_WEB[i].name) != NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(root_and_names_are_served_with_types),
        cmocka_unit_test(unknown_types_and_dotfiles_are_not_served),
        cmocka_unit_test(traversal_spellings_never_match),
        cmocka_unit_test(the_real_web_directory_has_an_index),
    };
    return cmocka_run_group_tests_name("service_static", tests, NULL, NULL);
}
