import decimal

from django.db import migrations


def seed(apps, schema_editor):
    Category = apps.get_model("shop", "Category")
    Product = apps.get_model("shop", "Product")
    Order = apps.get_model("shop", "Order")
    tools = Category.objects.create(name="tools", slug="tools")
    hammer = Product.objects.create(category=tools, name="hammer", sku="H-1",
                                    price=decimal.Decimal("12.50"), stock=5)
    Order.objects.create(product=hammer, qty=2, note="first")


def unseed(apps, schema_editor):
    apps.get_model("shop", "Order").objects.all().delete()
    apps.get_model("shop", "Product").objects.all().delete()
    apps.get_model("shop", "Category").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]

    operations = [migrations.RunPython(seed, unseed)]
