from django.contrib import admin

from .models import Attachment, Comment, Follow, Message, Post, Profile

admin.site.register([Post, Comment, Attachment, Follow, Profile, Message])
