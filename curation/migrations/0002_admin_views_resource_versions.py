"""The `admin` role opens Resource versions in the admin (README: "Resource versions → reveal…"; docs/SECURITY.md:
admins get "the reveal pages of resources and resource versions"). 0001 gave it the reveal right but not the
list and the change page to reach them from (`resources.view_resourceversion`). Viewers and curators do not
get it: docs/SECURITY.md gives them knowledge, versions (of knowledge), resources and jobs in the admin."""
from django.db import migrations

ROLE = "admin"
PERMISSION = ("resources", "resourceversion", "view_resourceversion", "Can view resource version")


def grant(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    app_label, model, codename, name = PERMISSION
    content_type, _ = ContentType.objects.get_or_create(app_label=app_label, model=model)
    # 0001 created every model's permissions; get_or_create keeps this right on a database that lost them
    permission, _ = Permission.objects.get_or_create(content_type=content_type, codename=codename,
                                                     defaults={"name": name})
    group, _ = Group.objects.get_or_create(name=ROLE)
    group.permissions.add(permission)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    app_label, _, codename, _ = PERMISSION
    for group in Group.objects.filter(name=ROLE):
        group.permissions.remove(*Permission.objects.filter(content_type__app_label=app_label, codename=codename))


class Migration(migrations.Migration):
    dependencies = [("curation", "0001_roles")]
    operations = [migrations.RunPython(grant, revoke)]
