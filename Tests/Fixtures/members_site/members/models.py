"""A user model of the project's own and what hangs off it, one of each rule Django's
delete() follows: CASCADE (documents, shares, the many-to-many tables), SET_NULL from a
row she owns (a pin on her document), SET_DEFAULT (a document's reviewer), PROTECT
(invoices: delete() refuses while she has one) and a GenericRelation (notes about her)."""
from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
from django.contrib.contenttypes.models import ContentType
from django.db import models


class Note(models.Model):
    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
    object_id = models.PositiveIntegerField()
    about = GenericForeignKey("content_type", "object_id")
    text = models.TextField()


class Member(AbstractUser):
    email = models.EmailField(unique=True)
    avatar = models.ImageField(upload_to="avatars/", blank=True)
    notes = GenericRelation(Note)

    USERNAME_FIELD = "email"
    REQUIRED_FIELDS = ["username"]


class Team(models.Model):
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams")
    lead = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")


class Document(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="documents")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_DEFAULT, null=True, default=None, related_name="+")
    file = models.FileField(upload_to="docs/")
    title = models.CharField(max_length=100)


class Share(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="shares")
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="shares")


class Pin(models.Model):
    document = models.ForeignKey(Document, on_delete=models.SET_NULL, null=True, related_name="pins")
    label = models.CharField(max_length=100)


class Invoice(models.Model):
    member = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="invoices")
    amount = models.IntegerField()


class Place(models.Model):
    name = models.CharField(max_length=100)


class Studio(Place):
    """Multi-table inheritance: a studio row and its place row; Django deletes both."""
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="studios")
