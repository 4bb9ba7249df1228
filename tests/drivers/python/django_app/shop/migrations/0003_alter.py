import datetime

from django.db import migrations, models


class Migration(migrations.Migration):
    """Schema changes on tables that hold rows: what a second migration of an app looks like."""

    dependencies = [("shop", "0002_seed")]

    operations = [
        migrations.AddField(
            model_name="product",
            name="weight",
            field=models.FloatField(null=True),
        ),
        # A NOT NULL column with a one-off default for the existing rows (what makemigrations
        # writes after asking): ADD COLUMN ... DEFAULT ... NOT NULL, then DROP DEFAULT.
        migrations.AddField(
            model_name="order",
            name="placed",
            field=models.DateField(default=datetime.date(2024, 1, 1)),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="product",
            name="stock",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="product",
            name="sku",
            field=models.CharField(max_length=40),
        ),
        migrations.RenameField(model_name="order", old_name="note", new_name="comment"),
        migrations.AddIndex(
            model_name="order",
            index=models.Index(fields=["placed", "qty"], name="shop_order_placed_qty_idx"),
        ),
    ]
