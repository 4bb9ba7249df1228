from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Category",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("name", models.CharField(max_length=50, unique=True)),
                ("slug", models.SlugField()),
            ],
        ),
        migrations.CreateModel(
            name="Product",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("sku", models.CharField(max_length=20)),
                ("price", models.DecimalField(decimal_places=2, max_digits=8)),
                ("stock", models.IntegerField(default=0)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("category", models.ForeignKey(on_delete=models.deletion.PROTECT,
                                               related_name="products", to="shop.category")),
            ],
            options={
                "indexes": [models.Index(fields=["name"], name="shop_product_name_idx")],
                "unique_together": {("category", "sku")},
            },
        ),
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("qty", models.PositiveIntegerField()),
                ("note", models.TextField(null=True)),
                ("product", models.ForeignKey(on_delete=models.deletion.CASCADE,
                                              related_name="orders", to="shop.product")),
            ],
        ),
    ]
