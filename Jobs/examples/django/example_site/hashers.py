"""Django's own PBKDF2 hasher with fewer iterations: the stored hash is in exactly the
format a site writes (pbkdf2_sha256$<iterations>$<salt>$<hash>, the iterations part of the
string), while the suite's many hashes and checks do not each cost a second of CPU."""
from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FixturePBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 10_000
