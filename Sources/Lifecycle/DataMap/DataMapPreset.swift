import Foundation

/// Maintained maps of a platform's own tables that an app's map includes by name
/// (`include: [supabase]`), so the app's map lists only the app's tables. A preset is
/// written in the map's own format (`tables:`, `ignore:`, `on_deletion:`; no `subject:`:
/// the user is the including map's) and checked against the live catalog like the rest:
/// a table of the platform that the preset does not know and that references the user
/// fails `map check` as any unmapped table does. A preset table missing from the database
/// (an app without that part of the platform installed) is left out, with a note.
///
/// The map's own entries win over a preset's, table by table: a table it maps or ignores
/// is taken as the map says.
public struct DataMapPreset: Sendable {
    public let name: String
    /// What the preset was written against, for `map check` and the docs.
    public let platform: String
    public let yaml: String

    public static let all: [DataMapPreset] = [supabase, django, djangoAllauth, djangoRESTFrameworkSimpleJWT, djangoRESTKnox]

    public static func named(_ name: String) -> DataMapPreset? { all.first { $0.name == name } }

    /// GoTrue's `auth` schema (supabase/auth migrations up to bc32168) and Supabase Storage's
    /// `storage.objects` (supabase/storage 4fa61fb). Where the user is `auth.users` itself,
    /// map it as the subject; otherwise (a profile table keyed by the same uuid) the preset
    /// masks it, keeping the row GoTrue and the profile's foreign key need.
    public static let supabase = DataMapPreset(name: "supabase", platform: "Supabase Auth (GoTrue) and Storage", yaml: """
        tables:
          # GoTrue reads its token columns as plain strings: "" rather than null.
          - table: auth.users
            owner: id
            export_file: auth_user
            columns: [email, phone, created_at, confirmed_at, email_confirmed_at, phone_confirmed_at, last_sign_in_at, raw_user_meta_data]
            erase:
              mask:
                email: "deleted-{key}@users.invalid"
                encrypted_password: ""
                phone: null
                email_change: ""
                phone_change: ""
                confirmation_token: ""
                recovery_token: ""
                email_change_token_new: ""
                email_change_token_current: ""
                phone_change_token: ""
                reauthentication_token: ""
                raw_user_meta_data: "{}"
                raw_app_meta_data: "{}"
          # Deleting a session deletes its refresh tokens and MFA claims (ON DELETE CASCADE);
          # refresh tokens are mapped by their user_id too (varchar, no foreign key), so a
          # token without a session goes as well.
          # What Supabase keeps about her goes in her export (never a token or a secret):
          # her sign-in methods, her sessions with their devices and addresses, her MFA
          # factors, and (below) her sign-in history.
          - table: auth.identities
            owner: user_id
            export_file: auth_identities
            columns: [provider, identity_data, last_sign_in_at, created_at, updated_at]
          - table: auth.sessions
            owner: user_id
            export_file: auth_sessions
            columns: [id, created_at, updated_at, refreshed_at, not_after, aal, user_agent, ip]
          - table: auth.refresh_tokens
            owner: user_id
          - table: auth.mfa_factors            # the TOTP secret; its challenges go with it
            owner: user_id
            export_file: auth_mfa_factors
            columns: [id, friendly_name, factor_type, status, phone, created_at, updated_at, last_challenged_at]
          - table: auth.one_time_tokens
            owner: user_id
          # No foreign key; its SAML relay states go with it. A flow linking an identity to an
          # account names that account in linking_target_id: a flow whose target is the user
          # goes too, whoever started it.
          - table: auth.flow_state
            owners: [user_id, linking_target_id]
          - table: auth.oauth_authorizations
            owner: user_id
          - table: auth.oauth_consents
            owner: user_id
          - table: auth.webauthn_credentials
            owner: user_id
          - table: auth.webauthn_challenges
            owner: user_id
          # The audit log names the user only inside its JSON payload: as actor_id for what she
          # did, and only in traits (user_id, user_email, user_phone) for what the dashboard or
          # the admin API did to her (actor service_role: created, invited, modified, deleted,
          # a factor updated). Either way the entry stays, emptied.
          - table: auth.audit_log_entries
            export_file: auth_sign_in_history
            columns: [created_at, ip_address, payload]
            owners:
              - column: payload
                json: actor_id
                erase: {mask: {payload: null, ip_address: ""}}
              - column: payload
                json: [traits, user_id]
                erase: {mask: {payload: null, ip_address: ""}}
          # Storage's record of the user's uploads: owner_id is text and owner (deprecated) a
          # uuid, neither a foreign key since storage migration 0017. Storage's trigger refuses
          # SQL deletes unless storage.allow_delete_query is set for the transaction. Each row
          # is a file, at bucket_id/name in the blob store (LIFECYCLE_BLOBS holding one folder
          # per bucket): it goes with its row, whether or not a row of the app names it.
          - table: storage.objects
            owners: [owner_id, owner]
            erase_settings: {storage.allow_delete_query: "true"}
            file_key: [bucket_id, name]
        ignore:
          - column: storage.buckets.owner
            reason: buckets are the project's, not a user's
          - column: storage.buckets.owner_id
            reason: buckets are the project's, not a user's
          - column: storage.s3_multipart_uploads.owner_id
            reason: uploads in flight, removed by Storage when they expire
          - column: storage.s3_multipart_uploads_parts.owner_id
            reason: uploads in flight, removed by Storage when they expire
        on_deletion:
          # Signed out everywhere when deletion is requested: no session to refresh, no
          # refresh token to trade (a session's tokens go with it). Signing in again stays
          # possible, and restores the account (the access token hook).
          remove:
            - table: auth.sessions
              owner: user_id
            - table: auth.refresh_tokens
              owner: user_id
            - table: auth.one_time_tokens
              owner: user_id
        """)

    /// Django's own apps (django.contrib.auth, admin, sessions; Django 5.2), for the default
    /// user model `auth_user`. `django_session` holds the user's id only inside its signed,
    /// encoded `session_data`: lifecycle reads and decodes each row to find the user's
    /// sessions, when deletion is asked for and again as the purge erases the user.
    public static let django = DataMapPreset(name: "django", platform: "Django 5.2 (auth, admin, contenttypes)", yaml: """
        tables:
          - table: auth_user_groups
            owner: user_id
          - table: auth_user_user_permissions
            owner: user_id
          # Admin history: what the user did as staff, and what staff did to the user (a
          # generic relation: content type auth.user, object_id as text).
          - table: django_admin_log
            owners:
              - user_id
              - column: object_id
                type: {column: content_type_id, table: django_content_type, match: {app_label: auth, model: user}}
        on_deletion:
          # Signed out everywhere: the database session backend's rows of the user.
          remove:
            - table: django_session
              owner: {column: session_data, encoding: django-signed, json: _auth_user_id}
        """)

    /// django-allauth 65 (account, socialaccount, mfa, usersessions); a part the project
    /// does not install has no tables and is left out.
    public static let djangoAllauth = DataMapPreset(name: "django-allauth", platform: "django-allauth 65", yaml: """
        tables:
          - table: account_emailaddress
            owner: user_id
          - table: account_emailconfirmation
            owner: {via: email_address_id, parent: account_emailaddress}
          - table: socialaccount_socialaccount
            owner: user_id
          # OAuth access and refresh tokens of the user's linked accounts.
          - table: socialaccount_socialtoken
            owner: {via: account_id, parent: socialaccount_socialaccount}
          - table: mfa_authenticator
            owner: user_id
          - table: usersessions_usersession
            owner: user_id
        ignore:
          - column: socialaccount_socialaccount.uid
            reason: the provider's id of the user (GitHub's), not this site's key; the row goes by its user_id
        on_deletion:
          remove:
            - table: usersessions_usersession
              owner: user_id
        """)

    /// djangorestframework-simplejwt 5.5 with its blacklist app
    /// (`rest_framework_simplejwt.token_blacklist`). A refresh token is refused only once its
    /// outstanding token is blacklisted: removing the outstanding rows would not sign the user
    /// out (and fails on the blacklist's foreign key), so a deletion request blacklists each
    /// of them, as the library's own sign-out does (`BlacklistedToken.objects.get_or_create`).
    public static let djangoRESTFrameworkSimpleJWT = DataMapPreset(
        name: "django-rest-framework-simplejwt", platform: "djangorestframework-simplejwt 5.5 (token_blacklist)", yaml: """
        tables:
          - table: token_blacklist_outstandingtoken
            owner: user_id
          - table: token_blacklist_blacklistedtoken
            owner: {via: token_id, parent: token_blacklist_outstandingtoken}
        on_deletion:
          insert:
            - table: token_blacklist_blacklistedtoken
              for_each: {table: token_blacklist_outstandingtoken, owner: user_id}
              link: token_id
              now: [blacklisted_at]
        """)

    /// django-rest-knox 5.1: a token is a row of `knox_authtoken`; without it the token no
    /// longer authenticates.
    public static let djangoRESTKnox = DataMapPreset(name: "django-rest-knox", platform: "django-rest-knox 5.1", yaml: """
        tables:
          - table: knox_authtoken
            owner: user_id
        on_deletion:
          remove:
            - table: knox_authtoken
              owner: user_id
        """)
}
