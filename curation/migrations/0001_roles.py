"""The three curator roles as groups: viewer < curator < admin (README: "Curation UI")."""
from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEWER = [
    "knowledge.view_knowledge", "knowledge.view_knowledgeversion", "resources.view_resource", "jobs.view_job",
]
CURATOR = VIEWER + ["knowledge.change_knowledge"]
ADMIN = CURATOR + ["resources.reveal_resource", "agents.view_auditevent", "resources.view_revealevent"]
ROLES = {"viewer": VIEWER, "curator": CURATOR, "admin": ADMIN}


def create_roles(apps, schema_editor):
    # Model permissions are normally created after migrate; the groups need them now.
    for app_config in apps.get_app_configs():
        models_module, app_config.models_module = getattr(app_config, "models_module", None), True
        create_permissions(app_config, verbosity=0, apps=apps)
        app_config.models_module = models_module
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    resource_type, _ = ContentType.objects.get_or_create(app_label="resources", model="resource")
    Permission.objects.get_or_create(content_type=resource_type, codename="reveal_resource",
                                     defaults={"name": "Can reveal a resource's secret (audited)"})
    for role, perms in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        for dotted in perms:
            app_label, codename = dotted.split(".")
            group.permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("knowledge", "0001_squashed"),
        ("resources", "0001_squashed"),
        ("agents", "0001_squashed"),
        ("jobs", "0001_squashed"),
    ]
    operations = [migrations.RunPython(create_roles, remove_roles)]
