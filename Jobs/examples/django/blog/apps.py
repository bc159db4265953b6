from django.apps import AppConfig


class BlogConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "blog"

    def ready(self):
        # Connects the sign-in receiver that restores a pending deletion.
        from . import lifecycle_restore  # noqa: F401
