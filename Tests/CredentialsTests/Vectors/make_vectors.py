"""Writes vectors.json: password hashes made by the tools real auth systems use.

Run through make-vectors.sh, which documents every vector and checks the
tools are present. Each entry is {tool, format, password, hash}; `format` is
the name PasswordHashFormat gives the hash, so the Swift tests can check
detection too. Costs are low on purpose (the Swift suite verifies every
vector several times) except for the few marked "defaults", which are what
each tool writes when nobody tunes it.
"""

import json
import os
from importlib.metadata import version
import subprocess
import sys

# Hashing runs through each tool's own implementation, not Debian's libxcrypt,
# wherever the tool has one: a vector made by the library under test would
# prove nothing. The mkpasswd vectors are the exception (mkpasswd *is*
# libxcrypt); they pin the formats Debian's own /etc/shadow uses.
os.environ["PASSLIB_BUILTIN_BCRYPT"] = "enabled"

import argon2  # noqa: E402
import bcrypt  # noqa: E402
from django.conf import settings  # noqa: E402

settings.configure()

from django.contrib.auth.hashers import (  # noqa: E402
    PBKDF2PasswordHasher,
    PBKDF2SHA1PasswordHasher,
)
from passlib.hash import bcrypt as passlib_bcrypt  # noqa: E402
from passlib.hash import pbkdf2_sha256 as passlib_pbkdf2_sha256  # noqa: E402
from passlib.hash import scrypt as passlib_scrypt  # noqa: E402
from passlib.hash import sha256_crypt as passlib_sha256_crypt  # noqa: E402
from passlib.hash import sha512_crypt as passlib_sha512_crypt  # noqa: E402

ASCII = "correct horse battery staple"
LATIN = "mot de passe é à ü"
JAPANESE = "日本語のパスワード"
EMOJI = "🔐 lock 😀 face"
MIXED = "Tr0ub4dor&3 café 日本 🐈"
# Exactly 72 bytes of UTF-8: all bcrypt reads (it ignores anything after).
BCRYPT_MAX = "ü" * 36
assert len(BCRYPT_MAX.encode()) == 72


def dpkg_version(package):
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package],
        check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


def htpasswd_bcrypt(password, cost):
    # -n prints instead of writing a file; -b takes the password as an argument.
    out = subprocess.run(
        ["htpasswd", "-nbB", "-C", str(cost), "user", password],
        check=True, capture_output=True, text=True,
    )
    return out.stdout.strip().split(":", 1)[1]


def mkpasswd(method, password, rounds=None):
    args = ["mkpasswd", "--method=" + method, "--stdin"]
    if rounds is not None:
        args.append("--rounds=%d" % rounds)
    out = subprocess.run(
        args, input=password, check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


class CheapPBKDF2(PBKDF2PasswordHasher):
    iterations = 1000


class CheapPBKDF2SHA1(PBKDF2SHA1PasswordHasher):
    iterations = 1000


def django_encode(hasher, password):
    return hasher.encode(password, hasher.salt())


def main(out_path):
    vectors = []

    def add(tool, fmt, password, hashed):
        vectors.append({"tool": tool, "format": fmt, "password": password, "hash": hashed})

    t = "python-bcrypt %s" % version("bcrypt")
    for pw in (ASCII, LATIN, EMOJI):
        add(t, "bcrypt", pw, bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=4)).decode())
    add(t, "bcrypt", JAPANESE,
        bcrypt.hashpw(JAPANESE.encode(), bcrypt.gensalt(rounds=5, prefix=b"2a")).decode())
    add(t, "bcrypt", BCRYPT_MAX, bcrypt.hashpw(BCRYPT_MAX.encode(), bcrypt.gensalt(rounds=4)).decode())

    t = "passlib %s (builtin bcrypt)" % version("passlib")
    passlib_bcrypt.set_backend("builtin")
    add(t, "bcrypt", MIXED, passlib_bcrypt.using(ident="2a", rounds=4).hash(MIXED))

    t = "htpasswd (apache2-utils %s)" % dpkg_version("apache2-utils")
    for pw in (ASCII, LATIN):
        add(t, "bcrypt", pw, htpasswd_bcrypt(pw, 5))

    t = "argon2-cffi %s" % version("argon2-cffi")
    cheap = dict(memory_cost=1024, time_cost=2, parallelism=1)
    for pw in (ASCII, JAPANESE, EMOJI, ""):
        add(t, "argon2id", pw, argon2.PasswordHasher(type=argon2.Type.ID, **cheap).hash(pw))
    for pw in (LATIN, MIXED):
        add(t, "argon2i", pw, argon2.PasswordHasher(type=argon2.Type.I, **cheap).hash(pw))
    add(t + " defaults", "argon2id", MIXED, argon2.PasswordHasher().hash(MIXED))

    t = "passlib %s" % version("passlib")
    for pw in (ASCII, JAPANESE, ""):
        add(t, "passlib-scrypt", pw, passlib_scrypt.using(rounds=8).hash(pw))
    add(t, "scrypt", EMOJI, passlib_scrypt.using(ident="$7$", rounds=8).hash(EMOJI))
    for pw in (ASCII, EMOJI):
        add(t, "passlib-pbkdf2-sha256", pw, passlib_pbkdf2_sha256.using(rounds=1000).hash(pw))
    add(t + " defaults", "passlib-pbkdf2-sha256", LATIN, passlib_pbkdf2_sha256.hash(LATIN))

    t = "passlib %s (builtin sha-crypt)" % version("passlib")
    passlib_sha512_crypt.set_backend("builtin")
    passlib_sha256_crypt.set_backend("builtin")
    add(t, "sha512crypt", JAPANESE, passlib_sha512_crypt.using(rounds=5000).hash(JAPANESE))
    add(t, "sha512crypt", LATIN, passlib_sha512_crypt.using(rounds=6000).hash(LATIN))
    add(t, "sha256crypt", EMOJI, passlib_sha256_crypt.using(rounds=6000).hash(EMOJI))

    t = "django %s" % version("django")
    for pw in (ASCII, LATIN, JAPANESE, ""):
        add(t, "django-pbkdf2-sha256", pw, django_encode(CheapPBKDF2(), pw))
    # Django uses the salt as UTF-8 text; its own salts are ASCII, but
    # nothing stops a custom one.
    add(t, "django-pbkdf2-sha256", ASCII, CheapPBKDF2().encode(ASCII, "sel-é-日本"))
    add(t + " defaults", "django-pbkdf2-sha256", EMOJI, django_encode(PBKDF2PasswordHasher(), EMOJI))
    add(t, "django-pbkdf2-sha1", MIXED, django_encode(CheapPBKDF2SHA1(), MIXED))

    t = "mkpasswd (whois %s)" % dpkg_version("whois")
    add(t, "yescrypt", ASCII, mkpasswd("yescrypt", ASCII))
    add(t, "yescrypt", JAPANESE, mkpasswd("yescrypt", JAPANESE, rounds=3))
    add(t, "sha512crypt", EMOJI, mkpasswd("sha512crypt", EMOJI))
    add(t, "sha256crypt", LATIN, mkpasswd("sha256crypt", LATIN, rounds=10000))
    add(t, "scrypt", MIXED, mkpasswd("scrypt", MIXED, rounds=6))
    add(t, "bcrypt", EMOJI, mkpasswd("bcrypt", EMOJI, rounds=5))

    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(vectors, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print("wrote %d vectors to %s" % (len(vectors), out_path))


if __name__ == "__main__":
    main(sys.argv[1])
