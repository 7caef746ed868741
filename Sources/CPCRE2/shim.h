#ifndef KVOD_CPCRE2_SHIM_H
#define KVOD_CPCRE2_SHIM_H
/* PCRE2 with 8-bit code units, from Debian's libpcre2-dev (pkg-config: libpcre2-8), for class `pattern`
 * rules. pcre2.h names its functions through token-pasting macros (pcre2_compile -> pcre2_compile_8) and
 * some constants through casts that Swift cannot import; the small inline functions below give Swift
 * what it needs under plain names. Nothing else lives here. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/** Compiles `length` bytes of `pattern` with `options`; NULL with the error code and offset on failure. */
static inline pcre2_code_8 *kvod_pcre2_compile(const char *pattern, size_t length, uint32_t options,
                                               int *error_code, size_t *error_offset) {
    return pcre2_compile_8((PCRE2_SPTR8)pattern, (PCRE2_SIZE)length, options, error_code,
                           (PCRE2_SIZE *)error_offset, NULL);
}

/** The message for a compile or match error code, into `buffer`; its length, or a negative code. */
static inline int kvod_pcre2_error_message(int code, char *buffer, size_t size) {
    return pcre2_get_error_message_8(code, (PCRE2_UCHAR8 *)buffer, (PCRE2_SIZE)size);
}

/** Matches `length` bytes of `subject` against `code` from offset 0, without checking UTF-8 again. */
static inline int kvod_pcre2_match(const pcre2_code_8 *code, const char *subject, size_t length,
                                   pcre2_match_data_8 *match_data, pcre2_match_context_8 *context) {
    return pcre2_match_8(code, (PCRE2_SPTR8)subject, (PCRE2_SIZE)length, 0, PCRE2_NO_UTF_CHECK,
                         match_data, context);
}

/** Whether PCRE2 found the compiled pattern anchored by its content (every top-level branch starts with `^`,
 * `\A`, `\G` or a suitable `.*`): such a pattern is tried at the start of the subject only. */
static inline int kvod_pcre2_is_anchored(const pcre2_code_8 *code) {
    uint32_t options = 0;
    if (pcre2_pattern_info_8(code, PCRE2_INFO_ALLOPTIONS, &options) != 0) return 0;
    return (options & PCRE2_ANCHORED) != 0;
}

static inline int kvod_pcre2_error_nomatch(void) { return PCRE2_ERROR_NOMATCH; }
static inline int kvod_pcre2_error_matchlimit(void) { return PCRE2_ERROR_MATCHLIMIT; }
static inline int kvod_pcre2_error_depthlimit(void) { return PCRE2_ERROR_DEPTHLIMIT; }
static inline int kvod_pcre2_error_heaplimit(void) { return PCRE2_ERROR_HEAPLIMIT; }
static inline int kvod_pcre2_error_nomemory(void) { return PCRE2_ERROR_NOMEMORY; }

#endif
