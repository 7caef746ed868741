#ifndef KVOD_CSODIUM_SHIM_H
#define KVOD_CSODIUM_SHIM_H
/* libsodium, from Debian's libsodium-dev (pkg-config: libsodium): Argon2id password hashes
   (crypto_pwhash_str), BLAKE2b token hashes (crypto_generichash), randombytes_buf, sodium_memcmp.
   Nothing else lives here. */
#include <sodium.h>
#endif
