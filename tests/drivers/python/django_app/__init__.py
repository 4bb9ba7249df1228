"""The Django apps of tests/drivers/python/django_suite.py.

django_app: the models the ORM cases use. It has no migrations: each case creates the tables it
needs with the schema editor and drops them afterwards, so the cases do not depend on each other.
django_app.shop (label "shop"): an app with migrations, which the migrate cases apply and revert.
"""
