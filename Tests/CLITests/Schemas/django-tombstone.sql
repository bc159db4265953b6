-- A Django project: django.contrib.auth's user table (hashes written by Django's
-- PBKDF2PasswordHasher as pbkdf2_sha256$<iterations>$<salt>$<hash>) and a blog app whose
-- FileFields store paths relative to MEDIA_ROOT (here: keys in the blob store).
-- Column types as `manage.py sqlmigrate` prints them for PostgreSQL; SQLite accepts them too.
CREATE TABLE auth_user (
    id integer PRIMARY KEY,
    password varchar(128) NOT NULL,
    last_login timestamp with time zone,
    is_superuser boolean NOT NULL,
    username varchar(150) NOT NULL UNIQUE,
    first_name varchar(150) NOT NULL,
    last_name varchar(150) NOT NULL,
    email varchar(254) NOT NULL,
    is_staff boolean NOT NULL,
    is_active boolean NOT NULL,
    date_joined timestamp with time zone NOT NULL
);

CREATE TABLE blog_post (
    id integer PRIMARY KEY,
    author_id integer NOT NULL REFERENCES auth_user(id),
    title varchar(200) NOT NULL,
    body text NOT NULL,
    cover varchar(100) NOT NULL,
    created_at timestamp with time zone NOT NULL
);

CREATE TABLE blog_comment (
    id integer PRIMARY KEY,
    post_id integer NOT NULL REFERENCES blog_post(id),
    author_id integer NOT NULL REFERENCES auth_user(id),
    body text NOT NULL,
    created_at timestamp with time zone NOT NULL
);

-- Files attached to a comment: owned two levels down, through the comment.
CREATE TABLE blog_attachment (
    id integer PRIMARY KEY,
    comment_id integer NOT NULL REFERENCES blog_comment(id),
    file varchar(100) NOT NULL
);

CREATE TABLE auth_group (
    id integer PRIMARY KEY,
    name varchar(150) NOT NULL UNIQUE
);

CREATE TABLE auth_user_groups (
    id integer PRIMARY KEY,
    user_id integer NOT NULL REFERENCES auth_user(id),
    group_id integer NOT NULL REFERENCES auth_group(id)
);

CREATE TABLE django_admin_log (
    id integer PRIMARY KEY,
    action_time timestamp with time zone NOT NULL,
    object_id text,
    object_repr varchar(200) NOT NULL,
    change_message text NOT NULL,
    user_id integer NOT NULL REFERENCES auth_user(id)
);
