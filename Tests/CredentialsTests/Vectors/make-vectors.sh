#!/bin/sh
# Regenerates vectors.json from the third-party tools whose hashes an imported
# user table really contains. The output is committed: the Swift tests read it
# and never need Python, pip or these tools.
#
# Usage:
#   python3 -m venv /tmp/credvenv
#   /tmp/credvenv/bin/pip install bcrypt argon2-cffi passlib django
#   apt-get install -y apache2-utils whois      # htpasswd, mkpasswd
#   Tests/CredentialsTests/Vectors/make-vectors.sh [/tmp/credvenv]
#
# Last generated with: Python 3.11, bcrypt 5.0.0, argon2-cffi 25.1.0,
# passlib 1.7.4, Django 5.2.19, apache2-utils 2.4.71-1~deb12u1, whois 5.5.17
# (Debian 12). Each entry names its tool and version in its "tool" field.
#
# What each vector is (passwords include é, 日本, emoji and the empty string):
#   python-bcrypt      $2b$ cost 4 (three passwords, plus one of exactly 72
#                      bytes, bcrypt's maximum); $2a$ cost 5 via
#                      gensalt(prefix=b"2a") -- what older PHP/Ruby wrote
#   passlib bcrypt     $2a$ cost 4 via ident="2a", passlib's pure-Python
#                      backend (independent of libxcrypt and of python-bcrypt)
#   htpasswd -B -C 5   $2y$ cost 5, as Apache and PHP's password_hash write it
#   argon2-cffi        argon2id m=1024 t=2 p=1 (four, one empty password),
#                      argon2i m=1024 t=2 p=1 (two), and one argon2id with the
#                      library defaults (m=65536 t=3 p=4, 0.2–0.3 s to verify)
#   passlib scrypt     $scrypt$ln=8,r=8,p=1 (three, one empty) and the $7$ form
#                      of the same algorithm (ln=8), computed by hashlib.scrypt;
#                      passlib writes these in unpadded standard base64
#                      (with '+'), not the '.' variant its pbkdf2 uses
#   passlib pbkdf2     $pbkdf2-sha256$ 1000 rounds (two) and one with passlib's
#                      default rounds (29000)
#   passlib sha-crypt  $6$ (implicit 5000 rounds and rounds=6000) and $5$
#                      rounds=6000, passlib's pure-Python backend
#   Django             pbkdf2_sha256$ via PBKDF2PasswordHasher subclassed to
#                      1000 iterations (four, one empty), one with a
#                      non-ASCII salt (used as UTF-8 text), one with Django's
#                      default iterations (1,000,000 in 5.2), and
#                      pbkdf2_sha1$ at 1000 iterations
#   mkpasswd           Debian's /etc/shadow formats through libxcrypt itself:
#                      yescrypt default ($y$j9T) and cost 3, sha512crypt
#                      default, sha256crypt rounds=10000, scrypt $7$ cost 6,
#                      bcrypt $2b$ cost 5
set -eu

venv=${1:-/tmp/credvenv}
here=$(cd "$(dirname "$0")" && pwd)

for tool in htpasswd mkpasswd dpkg-query; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "missing $tool: apt-get install -y apache2-utils whois" >&2
        exit 1
    }
done
[ -x "$venv/bin/python" ] || {
    echo "no venv at $venv: python3 -m venv $venv && $venv/bin/pip install bcrypt argon2-cffi passlib django" >&2
    exit 1
}

"$venv/bin/python" "$here/make_vectors.py" "$here/vectors.json"
