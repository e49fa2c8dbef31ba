/* bearer: the Authorization header's token (http/bearer.h). */
#include "service/http/bearer.h"

#include <string.h>
#include <strings.h>

const char *http_bearer_from_header(const char *hdr)
{
    if (hdr == NULL || strncasecmp(hdr, "Bearer ", 7) != 0)
        return NULL;
    const char *t = hdr + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    if (n == 0 || n > HTTP_TOKEN_MAX)
        return NULL;
    return t;
}
