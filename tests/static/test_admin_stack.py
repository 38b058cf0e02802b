"""`nylorun admin --stack` finds the stack's resources by their logical ids: each must be in template.yaml, of a
type whose physical id is what the setting holds."""

from __future__ import annotations

from nylorun.settings import Settings
from nylorun_client.admin import STACK_PARAMETERS, STACK_RESOURCES
from nylorun_local import template

# The physical id CloudFormation reports for each type (a name, an ARN, a URL, a key id), as the settings take it.
PHYSICAL_ID_IS = {
    "AWS::DynamoDB::Table": "name",
    "AWS::Serverless::StateMachine": "arn",
    "AWS::Events::EventBus": "name",
    "AWS::SQS::Queue": "url",
    "AWS::S3::Bucket": "name",
    "AWS::KMS::Key": "key id",
    "AWS::SecretsManager::Secret": "arn",
}


def test_every_resource_the_admin_commands_read_is_in_the_template() -> None:
    resources = template.load_template()["Resources"]
    for setting, logical_id in STACK_RESOURCES.items():
        # Given the setting's logical id, Then the template declares it, as a type whose physical id fits
        assert logical_id in resources, f"{setting}: {logical_id} is not in template.yaml"
        assert resources[logical_id]["Type"] in PHYSICAL_ID_IS, f"{setting}: {logical_id} is {resources[logical_id]['Type']}"


def test_every_parameter_a_resumed_turn_carries_is_in_the_template_and_in_the_globals() -> None:
    # Given the settings `nylorun admin --stack` reads from the stack's parameters (a resumed turn's execution
    # carries them as the first execution did)
    tpl = template.load_template()
    variables = tpl["Globals"]["Function"]["Environment"]["Variables"]
    for setting, parameter in STACK_PARAMETERS.items():
        # Then each is a parameter the functions get under that setting's name, and a setting the Runtime reads
        assert parameter in tpl["Parameters"], f"{setting}: {parameter} is not a parameter"
        assert variables.get(setting) == {"Ref": parameter}, f"{setting} is not !Ref {parameter} in Globals"
        assert setting.removeprefix("NYLORUN_").lower() in Settings.model_fields, setting
