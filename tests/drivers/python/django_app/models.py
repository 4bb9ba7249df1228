"""The models of the ORM cases of django_suite.py. No migrations: each case creates the tables
it uses with connection.schema_editor() (the DDL migrate would run) and drops them at the end."""

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q


class Everything(models.Model):
    char = models.CharField(max_length=30)
    text = models.TextField()
    small = models.SmallIntegerField()
    integer = models.IntegerField()
    big = models.BigIntegerField()
    positive = models.PositiveIntegerField()
    dec = models.DecimalField(max_digits=12, decimal_places=4)
    flt = models.FloatField()
    flag = models.BooleanField()
    maybe = models.BooleanField(null=True)
    day = models.DateField()
    moment = models.DateTimeField()
    clock = models.TimeField()
    uid = models.UUIDField()
    blob = models.BinaryField()
    span = models.DurationField()
    slug = models.SlugField()
    email = models.EmailField()
    nothing = models.IntegerField(null=True)


class Event(models.Model):
    name = models.CharField(max_length=20)
    at = models.DateTimeField()
    end = models.DateTimeField()
    dur = models.DurationField(null=True)


class Doc(models.Model):
    name = models.CharField(max_length=20)
    data = models.JSONField(null=True)


class Tagged(models.Model):
    name = models.CharField(max_length=20)
    tags = ArrayField(models.CharField(max_length=20), default=list)
    nums = ArrayField(models.IntegerField(), null=True)


class Host(models.Model):
    name = models.CharField(max_length=20)
    ip = models.GenericIPAddressField()
    ip_null = models.GenericIPAddressField(null=True)


class Author(models.Model):
    name = models.CharField(max_length=50, unique=True)
    born = models.DateField(null=True)


class Publisher(models.Model):
    name = models.CharField(max_length=50)


class Tag(models.Model):
    name = models.CharField(max_length=20, unique=True)


class Book(models.Model):
    title = models.CharField(max_length=100)
    author = models.ForeignKey(Author, models.CASCADE, related_name="books")
    publisher = models.ForeignKey(Publisher, models.SET_NULL, null=True, related_name="books")
    pages = models.IntegerField()
    price = models.DecimalField(max_digits=6, decimal_places=2)
    rating = models.FloatField(null=True)
    published = models.DateField()
    tags = models.ManyToManyField(Tag, related_name="books")


class Review(models.Model):
    book = models.ForeignKey(Book, models.CASCADE, related_name="reviews")
    stars = models.SmallIntegerField()
    body = models.TextField(blank=True, default="")


class Award(models.Model):
    author = models.ForeignKey(Author, models.PROTECT, related_name="awards")
    name = models.CharField(max_length=50)


class Club(models.Model):
    name = models.CharField(max_length=50)
    members = models.ManyToManyField(Author, through="Membership", related_name="clubs")


class Membership(models.Model):
    club = models.ForeignKey(Club, models.CASCADE)
    author = models.ForeignKey(Author, models.CASCADE)
    joined = models.DateField()


class Counter(models.Model):
    key = models.CharField(max_length=30, unique=True)
    value = models.IntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)


class Pair(models.Model):
    a = models.IntegerField()
    b = models.IntegerField()
    n = models.PositiveSmallIntegerField(default=0)

    class Meta:
        unique_together = [("a", "b")]
        constraints = [models.CheckConstraint(condition=Q(a__lte=F("b")), name="pair_a_le_b")]


class Place(models.Model):
    name = models.CharField(max_length=50)
    city = models.CharField(max_length=50)


class Restaurant(Place):
    serves_pizza = models.BooleanField(default=False)
    seats = models.IntegerField()


class Item(models.Model):
    n = models.IntegerField(db_index=True)
    label = models.CharField(max_length=20)


class Token(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    name = models.CharField(max_length=20)


class Article(models.Model):
    title = models.CharField(max_length=100)
    body = models.TextField()
