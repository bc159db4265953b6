"""Seeds the migrated shop with three customers (ada, bob, cy) through oscar's own code
(its test factories and its OrderCreator): products with stock, each customer's
addresses, baskets with lines, orders placed from them (with notes and lines), reviews and
votes on each other's reviews, wish lists with lines, product alerts, notifications
between them, emails, analytics records, and a product image file. Prints the users' ids
and the pages to render as JSON, each with the customer it belongs to (null: the shop's,
or a page staff use)."""
import io
import json
from decimal import Decimal as D

from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.management.base import BaseCommand
from django.db import transaction
from django.urls import reverse
from oscar.apps.analytics.models import UserProductView, UserRecord, UserSearch
from oscar.apps.catalogue.reviews.models import ProductReview, Vote
from oscar.apps.communication.models import Email, Notification
from oscar.apps.customer.models import ProductAlert
from oscar.apps.order.models import OrderNote
from oscar.apps.wishlists.models import Line as WishListLine
from oscar.apps.wishlists.models import WishList
from oscar.test import factories
from PIL import Image


class Command(BaseCommand):
    help = "Seed the shop with ada, bob and cy; print their ids and the product pages as JSON."

    def handle(self, *args, **options):
        User = get_user_model()
        with transaction.atomic():
            users = {
                name: User.objects.create_user(name, "%s@example.com" % name, "secret %s" % name, first_name=name.title())
                for name in ("ada", "bob", "cy")
            }
            products = [factories.create_product(title="Engine part %d" % n, price=D("%d.00" % (10 * n)), num_in_stock=50) for n in (1, 2, 3)]
            image = factories.ProductImageFactory(product=products[0])
            photo = io.BytesIO()
            Image.new("RGB", (8, 8), (200, 120, 40)).save(photo, "JPEG")
            image.original.save("engine.jpg", ContentFile(photo.getvalue()), save=True)
            orders = {}
            for index, (name, user) in enumerate(users.items()):
                factories.UserAddressFactory(user=user, first_name=user.first_name, last_name="Customer", line1="%d Analytical Way" % (index + 1))
                basket = factories.create_basket(empty=True)
                basket.owner = user
                basket.save()
                basket.add_product(products[index], quantity=2)
                basket.add_product(products[(index + 1) % 3])
                order = factories.create_order(user=user, basket=basket)
                OrderNote.objects.create(order=order, user=user, message="%s: please gift-wrap" % name)
                orders[name] = order
                open_basket = factories.create_basket(empty=True)
                open_basket.owner = user
                open_basket.save()
                open_basket.add_product(products[2])
                wishlist = WishList.objects.create(owner=user, name="%s's list" % name)
                WishListLine.objects.create(wishlist=wishlist, product=products[index], title=products[index].title)
                ProductAlert.objects.create(user=user, product=products[(index + 2) % 3])
                UserRecord.objects.update_or_create(user=user, defaults={"num_product_views": 3})
                UserProductView.objects.create(user=user, product=products[index])
                UserSearch.objects.create(user=user, query="engine %s" % name)
                Email.objects.create(user=user, email=user.email, subject="Your order", body_text="Thanks, %s" % name)
            # Staff notes on ada's order by bob: bob's rows on her order.
            OrderNote.objects.create(order=orders["ada"], user=users["bob"], message="bob: shipped ada's order")
            reviews = {}
            for name, user in users.items():
                reviews[name] = ProductReview.objects.create(
                    product=products[0] if name != "cy" else products[1], user=user, score=4, title="%s's review" % name,
                    body="Works well, says %s." % name, status=ProductReview.APPROVED,
                )
            Vote.objects.create(review=reviews["ada"], user=users["bob"], delta=Vote.UP)
            Vote.objects.create(review=reviews["bob"], user=users["ada"], delta=Vote.UP)
            Vote.objects.create(review=reviews["cy"], user=users["ada"], delta=Vote.DOWN)
            Vote.objects.create(review=reviews["cy"], user=users["bob"], delta=Vote.UP)
            Notification.objects.create(recipient=users["ada"], sender=users["bob"], subject="bob to ada")
            Notification.objects.create(recipient=users["bob"], sender=users["ada"], subject="ada to bob")
            Notification.objects.create(recipient=users["cy"], sender=users["bob"], subject="bob to cy")
        pages = [{"url": url, "owner": None} for url in (
            reverse("catalogue:index"), reverse("basket:summary"), reverse("dashboard:index"), reverse("dashboard:order-list"),
            reverse("dashboard:users-index"), reverse("dashboard:reviews-list"),
        )]
        for product in products:
            pages.append({"url": product.get_absolute_url(), "owner": None})
            pages.append({"url": reverse("catalogue:reviews-list", kwargs={"product_slug": product.slug, "product_pk": product.pk}), "owner": None})
        for name, review in reviews.items():
            kwargs = {"product_slug": review.product.slug, "product_pk": review.product.pk, "pk": review.pk}
            pages.append({"url": reverse("catalogue:reviews-detail", kwargs=kwargs), "owner": name})
        # Orders stay when their customer goes (on_delete=SET_NULL): staff still open every one.
        for order in orders.values():
            pages.append({"url": reverse("dashboard:order-detail", kwargs={"number": order.number}), "owner": None})
        for name, user in users.items():
            pages.append({"url": reverse("dashboard:user-detail", kwargs={"pk": user.pk}), "owner": name})
        print(json.dumps({"users": {name: user.pk for name, user in users.items()}, "pages": pages}))
