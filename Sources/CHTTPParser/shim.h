#ifndef KVOD_CHTTPPARSER_SHIM_H
#define KVOD_CHTTPPARSER_SHIM_H
/* The HTTP/1.1 request parser, from Debian's libhttp-parser-dev (2.9.4; no pkg-config file). */
#include <http_parser.h>

/* Macros Swift cannot import. */
static inline enum http_errno kvod_http_parser_errno(const http_parser *parser) { return HTTP_PARSER_ERRNO(parser); }
#endif
