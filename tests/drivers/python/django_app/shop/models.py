"""The state the shop migrations (0001_initial, 0002_seed, 0003_alter) leave."""

from django.db import models


class Category(models.Model):
    name = models.CharField(max_length=50, unique=True)
    slug = models.SlugField(max_length=50)


class Product(models.Model):
    category = models.ForeignKey(Category, models.PROTECT, related_name="products")
    name = models.CharField(max_length=100)
    sku = models.CharField(max_length=40)  # 20 in 0001
    price = models.DecimalField(max_digits=8, decimal_places=2)
    stock = models.BigIntegerField(default=0)  # IntegerField in 0001
    weight = models.FloatField(null=True)  # added by 0003
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        unique_together = [("category", "sku")]
        indexes = [models.Index(fields=["name"], name="shop_product_name_idx")]


class Order(models.Model):
    product = models.ForeignKey(Product, models.CASCADE, related_name="orders")
    qty = models.PositiveIntegerField()
    comment = models.TextField(null=True)  # "note" in 0001
    placed = models.DateField()  # added by 0003, existing rows get 2024-01-01

    class Meta:
        indexes = [models.Index(fields=["placed", "qty"], name="shop_order_placed_qty_idx")]
