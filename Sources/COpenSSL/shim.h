#ifndef KVOD_COPENSSL_SHIM_H
#define KVOD_COPENSSL_SHIM_H
/*
 * OpenSSL 3 (libssl and libcrypto), from Debian's libssl-dev (pkg-config: openssl).
 *
 * Swift imports OpenSSL's functions but not its function-like macros, nor the constants built from
 * them (SSL_OP_BIT(n) and friends). The few kvod uses are wrapped here as static inline functions,
 * named after the macro with a kvod_ prefix. Nothing else lives here.
 */
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* SSL_CTX_set_min_proto_version: 1 on success. */
static inline int kvod_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

/* SSL_CTX_set_mode: returns the new mode bits. */
static inline long kvod_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

/* SSL_CTX_set_session_cache_mode: returns the previous mode. */
static inline long kvod_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

/* SSL_set_tlsext_host_name (SNI, client side): 1 on success. */
static inline int kvod_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

/* BIO_set_mem_eof_return: what a drained memory BIO's read returns (-1: "retry", not end of file). */
static inline int kvod_BIO_set_mem_eof_return(BIO *bio, int value) {
    return (int)BIO_set_mem_eof_return(bio, value);
}

/* BIO_set_retry_read, BIO_set_retry_write and BIO_clear_retry_flags, for a BIO method's read and write callbacks. */
static inline void kvod_BIO_set_retry_read(BIO *bio) { BIO_set_retry_read(bio); }
static inline void kvod_BIO_set_retry_write(BIO *bio) { BIO_set_retry_write(bio); }
static inline void kvod_BIO_clear_retry_flags(BIO *bio) { BIO_clear_retry_flags(bio); }

/* OPENSSL_free, for memory OpenSSL allocated (ASN1_STRING_to_UTF8's result). */
static inline void kvod_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }

/* Option and mode bits (SSL_OP_BIT(n) cannot be imported). */
static inline uint64_t kvod_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t kvod_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline long kvod_SSL_MODE_RELEASE_BUFFERS(void) { return SSL_MODE_RELEASE_BUFFERS; }
static inline long kvod_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER(void) { return SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER; }
static inline long kvod_SSL_MODE_AUTO_RETRY(void) { return SSL_MODE_AUTO_RETRY; }
static inline long kvod_SSL_SESS_CACHE_OFF(void) { return SSL_SESS_CACHE_OFF; }

#endif
