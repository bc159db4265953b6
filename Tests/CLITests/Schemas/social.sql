-- A small social app with every shape the data map handles: integer keys, rows owned two
-- levels down (media_variants → media → statuses → members), rows naming two users
-- (follows, messages), composite keys and a table without a primary key, blob columns,
-- replies that keep a deleted user's post (masked) when someone else answered it, and
-- other users' favourites that go with a post.
CREATE TABLE members (
    id integer PRIMARY KEY,
    handle varchar(30) NOT NULL UNIQUE,
    email varchar(254) NOT NULL UNIQUE,
    pw text,
    avatar_key text,
    created_at timestamp NOT NULL
);

CREATE TABLE statuses (
    id integer PRIMARY KEY,
    member_id integer REFERENCES members(id),
    in_reply_to_id integer REFERENCES statuses(id),
    body text,
    created_at timestamp NOT NULL
);

CREATE TABLE media (
    id integer PRIMARY KEY,
    status_id integer NOT NULL REFERENCES statuses(id),
    file_key text NOT NULL
);

-- No primary key: identified by (media_id, size).
CREATE TABLE media_variants (
    media_id integer NOT NULL REFERENCES media(id),
    size varchar(10) NOT NULL,
    file_key text NOT NULL
);

CREATE TABLE favourites (
    member_id integer NOT NULL REFERENCES members(id),
    status_id integer NOT NULL REFERENCES statuses(id),
    created_at timestamp NOT NULL,
    PRIMARY KEY (member_id, status_id)
);

CREATE TABLE follows (
    follower_id integer NOT NULL REFERENCES members(id),
    followee_id integer NOT NULL REFERENCES members(id),
    PRIMARY KEY (follower_id, followee_id)
);

CREATE TABLE messages (
    id integer PRIMARY KEY,
    sender_id integer REFERENCES members(id),
    recipient_id integer REFERENCES members(id),
    body text,
    sent_at timestamp NOT NULL
);
