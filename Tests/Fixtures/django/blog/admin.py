from django.contrib import admin

from .models import Attachment, Comment, Follow, Post, Profile

admin.site.register([Post, Comment, Attachment, Follow, Profile])
