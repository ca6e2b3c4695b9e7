"""docker-compose.yml stays a valid Compose file: Kafka (KRaft) and Kafka UI reading it.

Docker cannot run on the CI machine, so `docker compose config` is not run;
this checks the YAML and the settings that make the topics visible in Kafka UI.
"""

from __future__ import annotations

import yaml

from squall.settings import ROOT

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def test_the_file_is_yaml_with_the_kafka_and_kafka_ui_services():
    assert set(COMPOSE["services"]) == {"kafka", "kafka-ui"}
    for service in COMPOSE["services"].values():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), image  # pinned versions


def test_kafka_runs_in_kraft_mode_without_zookeeper():
    env = COMPOSE["services"]["kafka"]["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{env['KAFKA_NODE_ID']}@")
    assert not any("ZOOKEEPER" in k for k in env)
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # squall creates its own, partitioned topics


def test_kafka_ui_reads_the_broker_on_its_docker_listener_with_string_keys_and_values():
    ui = COMPOSE["services"]["kafka-ui"]
    kafka_env = COMPOSE["services"]["kafka"]["environment"]
    advertised = kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert f"DOCKER://{ui['environment']['KAFKA_CLUSTERS_0_BOOTSTRAPSERVERS']}" in advertised
    assert ui["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert ui["environment"]["KAFKA_CLUSTERS_0_DEFAULTKEYSERDE"] == "String"
    assert ui["environment"]["KAFKA_CLUSTERS_0_DEFAULTVALUESERDE"] == "String"


def test_published_ports_are_bound_to_loopback_only():
    for name, service in COMPOSE["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
