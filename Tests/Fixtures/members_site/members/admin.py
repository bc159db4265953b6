from django.contrib import admin

from .models import Document, Invoice, Member, Note, Pin, Place, Share, Studio, Team

admin.site.register([Member, Note, Team, Document, Share, Pin, Invoice, Place, Studio])
