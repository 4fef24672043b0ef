"""Option definitions: one frozen dataclass per nova.conf section.

The dataclasses *are* the schema. Field names are nova's option names, defaults are nova's
defaults, and ``field.metadata`` carries what the loader, the validator and the sample
generator need (help, bounds, choices, secret, mutable-on-SIGHUP). Nothing here reads files.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any


def opt(
    default: Any,
    help: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: tuple[str, ...] | None = None,
    secret: bool = False,
    mutable: bool = False,
    deprecated_names: tuple[str, ...] = (),
    multi: bool = False,
    sample_default: str | None = None,
    rest: bool = False,
) -> Any:
    """Declare one option. Lists are stored as tuples so sections stay hashable values.

    ``multi``: a repeated key accumulates one value per line (oslo MultiStrOpt) instead of
    a comma list where the last line wins. ``sample_default``: what the generated sample
    shows when the real default depends on the machine (e.g. the host name). ``rest``: the
    field collects the section's other keys as (name, raw value) pairs instead of ignoring them.
    """
    meta = {
        "help": help,
        "min": min,
        "max": max,
        "choices": choices,
        "secret": secret,
        "mutable": mutable,
        "deprecated_names": deprecated_names,
        "multi": multi,
        "sample_default": sample_default,
        "rest": rest,
    }
    if isinstance(default, list):
        default = tuple(default)
    return field(default=default, metadata=meta)


DEFAULT_FILTERS = (
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
)


@dataclass(frozen=True, slots=True)
class DefaultOptions:
    """``[DEFAULT]``."""

    transport_url: str = opt(
        "rabbit://guest:guest@127.0.0.1:5672/",
        "oslo.messaging transport URL; several hosts separated by ',' fail over.",
        secret=True,
    )
    control_exchange: str = opt("nova", "AMQP exchange the nova services talk on.")
    host: str = opt(
        socket.gethostname(),
        "Name of this scheduler host; used for the scheduler.<host> queue.",
        sample_default="<current hostname>",
    )
    service_down_time: int = opt(
        60, "Seconds since the last heartbeat after which a compute service is down.", min=1
    )
    report_interval: int = opt(10, "Seconds between compute service heartbeats.", min=1)
    rpc_response_timeout: int = opt(60, "Seconds to wait for an RPC response.", min=1)
    long_rpc_timeout: int = opt(1800, "Timeout for long RPC calls such as scheduling.", min=1)
    default_availability_zone: str = opt("nova", "AZ of hosts not in an AZ aggregate.")
    cpu_allocation_ratio: float | None = opt(
        None, "Virtual CPU to physical CPU ratio overriding the compute node's.", min=0.0
    )
    ram_allocation_ratio: float | None = opt(
        None, "Virtual RAM to physical RAM ratio overriding the compute node's.", min=0.0
    )
    disk_allocation_ratio: float | None = opt(
        None, "Virtual disk to physical disk ratio overriding the compute node's.", min=0.0
    )
    initial_cpu_allocation_ratio: float = opt(4.0, "CPU ratio used when a node has none.", min=0.0)
    initial_ram_allocation_ratio: float = opt(1.0, "RAM ratio used when a node has none.", min=0.0)
    initial_disk_allocation_ratio: float = opt(
        1.0, "Disk ratio used when a node has none.", min=0.0
    )
    debug: bool = opt(False, "Log at DEBUG level.", mutable=True)
    log_file: str | None = opt(None, "Log to this file instead of stderr.")


@dataclass(frozen=True, slots=True)
class DatabaseOptions:
    """``[database]``: the cell0/cell database nova-scheduler was given (used for cell lookups)."""

    connection: str | None = opt(
        None, "SQLAlchemy URL of the cell database (PostgreSQL or MySQL/MariaDB).", secret=True
    )


@dataclass(frozen=True, slots=True)
class ApiDatabaseOptions:
    """``[api_database]``: cell mappings, host mappings and aggregates live here."""

    connection: str | None = opt(
        None, "SQLAlchemy URL of the nova API database (PostgreSQL or MySQL/MariaDB).", secret=True
    )


@dataclass(frozen=True, slots=True)
class PlacementDatabaseOptions:
    """``[placement_database]``, as placement.conf names it: the live Placement mirror reads it."""

    connection: str | None = opt(
        None,
        "SQLAlchemy URL of Placement's database (PostgreSQL only); read-only access is enough. "
        "Set (e.g. by adding --config-file /etc/placement/placement.conf) to answer allocation "
        "candidates from a live in-memory mirror; unset, every request asks Placement.",
        secret=True,
    )


@dataclass(frozen=True, slots=True)
class PlacementOptions:
    """``[placement]``: keystoneauth options nova uses to reach Placement."""

    auth_type: str | None = opt(
        None,
        "keystoneauth plugin, as in nova: admin_token, password, v3password, v3token, "
        "v3applicationcredential, v3totp, v3oidc*, http_basic, none, or any plugin installed "
        "as a keystoneauth1.plugin entry point. Unset = none.",
    )
    auth_section: str | None = opt(
        None,
        "Read auth_type and the auth plugin's options from this section instead, as "
        "keystoneauth does (e.g. keystone_authtoken); session and catalog options stay here.",
    )
    auth_url: str | None = opt(None, "Keystone endpoint, e.g. http://keystone:5000/v3.")
    username: str | None = opt(None, "User name for password auth.")
    user_id: str | None = opt(None, "User id for password auth.")
    password: str | None = opt(None, "Password for password auth.", secret=True)
    user_domain_name: str | None = opt(None, "Domain name of the user.")
    user_domain_id: str | None = opt(None, "Domain id of the user.")
    project_name: str | None = opt(None, "Project to scope the token to.")
    project_id: str | None = opt(None, "Project id to scope the token to.")
    project_domain_name: str | None = opt(None, "Domain name of the project.")
    project_domain_id: str | None = opt(None, "Domain id of the project.")
    system_scope: str | None = opt(None, "System scope, e.g. 'all'.")
    application_credential_id: str | None = opt(None, "Application credential id.")
    application_credential_name: str | None = opt(None, "Application credential name.")
    application_credential_secret: str | None = opt(
        None, "Application credential secret.", secret=True
    )
    endpoint_override: str | None = opt(None, "Use this Placement URL instead of the catalog.")
    region_name: str | None = opt(None, "Region to pick the Placement endpoint in.")
    valid_interfaces: tuple[str, ...] = opt(
        ["internal", "public"], "Catalog interfaces to try, in order."
    )
    service_type: str = opt("placement", "Catalog service type of Placement.")
    service_name: str | None = opt(None, "Catalog service name of Placement.")
    timeout: float | None = opt(None, "Per-request timeout in seconds (None = 30 s).", min=0.0)
    connect_retries: int | None = opt(None, "Retries on connection errors.", min=0)
    status_code_retries: int | None = opt(None, "Retries on retriable status codes.", min=0)
    insecure: bool = opt(False, "Skip TLS certificate verification.")
    cafile: str | None = opt(None, "CA bundle to verify Placement's certificate.")
    certfile: str | None = opt(None, "Client certificate.")
    keyfile: str | None = opt(None, "Client key.")
    collect_timing: bool = opt(False, "keystoneauth: collect per-API call timing information.")
    split_loggers: bool = opt(False, "keystoneauth: log requests to multiple loggers.")
    plugin_options: tuple[tuple[str, str], ...] = opt(
        [],
        "Every other [placement] option (e.g. endpoint and token for admin_token, passcode for "
        "v3totp), written under its own name and read by the auth plugin's keystoneauth loader.",
        rest=True,
    )


#: ``[placement]`` options keystoneauth's session and adapter read (never from auth_section).
KEYSTONE_SESSION_OPTIONS = frozenset(
    {
        "cafile", "certfile", "keyfile", "insecure", "timeout", "collect_timing",
        "split_loggers", "service_type", "service_name", "interface", "valid_interfaces",
        "region_name", "endpoint_override", "version", "min_version", "max_version",
        "connect_retries", "connect_retry_delay", "status_code_retries",
        "status_code_retry_delay", "retriable_status_codes",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """``[scheduler]``."""

    max_attempts: int = opt(3, "Build attempts per instance; alternates = max_attempts-1.", min=1)
    max_placement_results: int = opt(
        1000, "limit for GET /allocation_candidates.", min=1, mutable=True
    )
    workers: int | None = opt(None, "Accepted for compatibility; asyncsched runs one process.")
    discover_hosts_in_cells_interval: int = opt(
        -1, "Accepted for compatibility; host discovery is nova-manage's job.", min=-1
    )
    query_placement_for_routed_network_aggregates: bool = opt(
        False, "Routed-network prefilter (needs Neutron; not run by asyncsched)."
    )
    limit_tenants_to_placement_aggregate: bool = opt(
        False, "Restrict tenants to aggregates tagged filter_tenant_id*."
    )
    placement_aggregate_required_for_tenants: bool = opt(
        False, "With the above: a tenant with no aggregate gets NoValidHost."
    )
    query_placement_for_image_type_support: bool = opt(
        False, "Require COMPUTE_IMAGE_TYPE_<disk_format> on hosts."
    )
    enable_isolated_aggregate_filtering: bool = opt(
        False, "Forbid trait-isolated aggregates unless their traits are requested."
    )
    image_metadata_prefilter: bool = opt(False, "Turn image hw_* properties into traits.")


@dataclass(frozen=True, slots=True)
class FilterSchedulerOptions:
    """``[filter_scheduler]``."""

    host_subset_size: int = opt(1, "Pick at random among the best N hosts.", min=1, mutable=True)
    max_io_ops_per_host: int = opt(8, "IoOpsFilter threshold.", min=0, mutable=True)
    max_instances_per_host: int = opt(50, "NumInstancesFilter threshold.", min=1, mutable=True)
    track_instance_changes: bool = opt(True, "Computes cast instance info to the scheduler.")
    available_filters: tuple[str, ...] = opt(
        ["nova.scheduler.filters.all_filters"],
        "Filter classes that may be enabled.",
        multi=True,
    )
    enabled_filters: tuple[str, ...] = opt(
        list(DEFAULT_FILTERS), "Filters applied, in this order.", mutable=True
    )
    weight_classes: tuple[str, ...] = opt(
        ["nova.scheduler.weights.all_weighers"], "Weighers applied.", mutable=True
    )
    ram_weight_multiplier: float = opt(1.0, "RAMWeigher multiplier.", mutable=True)
    cpu_weight_multiplier: float = opt(1.0, "CPUWeigher multiplier.", mutable=True)
    disk_weight_multiplier: float = opt(1.0, "DiskWeigher multiplier.", mutable=True)
    hypervisor_version_weight_multiplier: float = opt(
        1.0, "HypervisorVersionWeigher multiplier.", mutable=True
    )
    num_instances_weight_multiplier: float = opt(
        0.0, "NumInstancesWeigher multiplier.", mutable=True
    )
    io_ops_weight_multiplier: float = opt(-1.0, "IoOpsWeigher multiplier.", mutable=True)
    image_props_weight_multiplier: float = opt(
        0.0, "ImagePropertiesWeigher multiplier.", mutable=True
    )
    image_props_weight_setting: tuple[str, ...] = opt(
        [], "ImagePropertiesWeigher per-property ratios, name=ratio.", mutable=True
    )
    pci_weight_multiplier: float = opt(1.0, "PCIWeigher multiplier.", min=0.0, mutable=True)
    soft_affinity_weight_multiplier: float = opt(
        1.0, "ServerGroupSoftAffinityWeigher multiplier.", min=0.0, mutable=True
    )
    soft_anti_affinity_weight_multiplier: float = opt(
        1.0, "ServerGroupSoftAntiAffinityWeigher multiplier.", min=0.0, mutable=True
    )
    build_failure_weight_multiplier: float = opt(
        1000000.0, "BuildFailureWeigher multiplier.", mutable=True
    )
    cross_cell_move_weight_multiplier: float = opt(
        1000000.0, "CrossCellWeigher multiplier.", mutable=True
    )
    shuffle_best_same_weighed_hosts: bool = opt(
        False, "Shuffle the hosts tied at the best weight.", mutable=True
    )
    image_properties_default_architecture: str | None = opt(
        None, "Default hw_architecture for ImagePropertiesFilter.", mutable=True
    )
    isolated_images: tuple[str, ...] = opt([], "IsolatedHostsFilter images.", mutable=True)
    isolated_hosts: tuple[str, ...] = opt([], "IsolatedHostsFilter hosts.", mutable=True)
    restrict_isolated_hosts_to_isolated_images: bool = opt(
        True, "Isolated hosts only take isolated images.", mutable=True
    )
    aggregate_image_properties_isolation_namespace: str | None = opt(
        None, "AggregateImagePropertiesIsolation key namespace (deprecated).", mutable=True
    )
    aggregate_image_properties_isolation_separator: str = opt(
        ".", "AggregateImagePropertiesIsolation namespace separator (deprecated).", mutable=True
    )
    pci_in_placement: bool = opt(False, "PCI devices are scheduled in Placement.")


@dataclass(frozen=True, slots=True)
class MetricsOptions:
    """``[metrics]``: MetricsFilter and MetricsWeigher."""

    weight_multiplier: float = opt(1.0, "MetricsWeigher multiplier.", mutable=True)
    weight_setting: tuple[str, ...] = opt([], "Metrics to weigh, name=ratio.", mutable=True)
    required: bool = opt(True, "A missing metric is an error (host fails) when True.", mutable=True)
    weight_of_unavailable: float = opt(
        -10000.0, "Weight of a host missing a metric when not required.", mutable=True
    )


@dataclass(frozen=True, slots=True)
class ComputeOptions:
    """``[compute]``: the one option of nova-compute's section the NUMA fit reads."""

    packing_host_numa_cells_allocation_strategy: bool = opt(
        False,
        "Fit guest NUMA cells onto the most used host cells first (pack) instead of the ones "
        "with the most free resources (spread).",
    )


@dataclass(frozen=True, slots=True)
class WorkaroundsOptions:
    """``[workarounds]``."""

    disable_fallback_pcpu_query: bool = opt(False, "Skip the VCPU fallback for pinned flavors.")


@dataclass(frozen=True, slots=True)
class OsloMessagingRabbitOptions:
    """``[oslo_messaging_rabbit]``: must mirror the conductors' so declarations match."""

    amqp_durable_queues: bool = opt(False, "Durable control exchange and topic queues.")
    amqp_auto_delete: bool = opt(False, "Auto-delete control exchange and topic queues.")
    rabbit_ha_queues: bool = opt(False, "Legacy x-ha-policy=all on queues.")
    rabbit_quorum_queue: bool = opt(False, "Topic queues are quorum queues.")
    rabbit_transient_quorum_queue: bool = opt(False, "Fanout and reply queues are quorum queues.")
    rabbit_quorum_delivery_limit: int = opt(0, "x-delivery-limit of quorum queues.", min=0)
    rabbit_quorum_max_memory_length: int = opt(0, "x-max-in-memory-length of quorum queues.", min=0)
    rabbit_quorum_max_memory_bytes: int = opt(0, "x-max-in-memory-bytes of quorum queues.", min=0)
    rabbit_transient_queues_ttl: int = opt(
        1800, "Seconds before an unused fanout/reply queue expires.", min=0
    )
    rabbit_stream_fanout: bool = opt(False, "Fanout through one stream queue.")
    rabbit_qos_prefetch_count: int = opt(
        0,
        "basic.qos prefetch; 0 = asyncsched's [asyncsched] max_held_requests (nova: unlimited).",
        min=0,
    )
    heartbeat_timeout_threshold: int = opt(60, "AMQP heartbeat timeout in seconds.", min=0)
    heartbeat_rate: int = opt(3, "Heartbeat checks per timeout window.", min=1)
    rabbit_retry_interval: float = opt(
        1.0, "First retry delay after RabbitMQ refused our declarations (406).", min=0.0
    )
    rabbit_retry_backoff: float = opt(
        2.0, "Retry delay increment after a refusal (406), in seconds.", min=0.0
    )
    rabbit_interval_max: float = opt(
        30.0, "Largest retry delay after a refusal (406), in seconds.", min=0.0
    )
    kombu_reconnect_delay: float = opt(
        1.0,
        "Accepted for compatibility; reconnects follow [asyncsched] broker_reconnect_delay.",
        min=0.0,
    )
    direct_mandatory_flag: bool = opt(True, "Publish replies with mandatory=True.")
    kombu_missing_consumer_retry_timeout: int = opt(
        60, "Seconds a reply to a missing reply queue is retried before it is dropped.", min=0
    )
    enable_cancel_on_failover: bool = opt(False, "x-cancel-on-ha-failover consumer arg.")
    ssl: bool = opt(False, "Connect over TLS.")
    ssl_ca_file: str | None = opt(None, "CA bundle for the broker certificate.")
    ssl_cert_file: str | None = opt(None, "Client certificate.")
    ssl_key_file: str | None = opt(None, "Client key.")
    ssl_enforce_fips_mode: bool = opt(False, "Accepted for compatibility.")


@dataclass(frozen=True, slots=True)
class NotificationsOptions:
    """``[notifications]``: which notification formats nova services emit."""

    notification_format: str = opt(
        "unversioned",
        "unversioned (legacy dicts on [oslo_messaging_notifications] topics), versioned "
        "(nova objects on versioned_notifications_topics) or both.",
        choices=("unversioned", "versioned", "both"),
    )
    versioned_notifications_topics: tuple[str, ...] = opt(
        ["versioned_notifications"], "Topics the versioned notifications are sent to."
    )


@dataclass(frozen=True, slots=True)
class OsloMessagingNotificationsOptions:
    """``[oslo_messaging_notifications]``: how notifications are sent (none by default)."""

    driver: tuple[str, ...] = opt(
        [],
        "messagingv2, messaging, log or noop; unset or noop sends nothing (nova's default).",
        multi=True,
    )
    transport_url: str | None = opt(
        None, "Broker for notifications; unset = [DEFAULT] transport_url.", secret=True
    )
    topics: tuple[str, ...] = opt(
        ["notifications"], "Topics the unversioned (legacy) notifications are sent to."
    )
    retry: int = opt(-1, "Send attempts per notification; -1 = keep trying within budget.", min=-1)


@dataclass(frozen=True, slots=True)
class AsyncschedOptions:
    """``[asyncsched]``: options of ours with no nova equivalent."""

    driver: str = opt(
        "filter_scheduler",
        "Decision driver: filter_scheduler or chance (random up hosts, still claims).",
        choices=("filter_scheduler", "chance"),
    )
    refresh_interval: float = opt(
        10.0, "Seconds between incremental host-state refreshes.", min=0.1
    )
    full_resync_interval: float = opt(300.0, "Seconds between full host-state reloads.", min=1.0)
    refresh_jitter: float = opt(
        0.1, "Fraction of the interval added at random to each refresh.", min=0.0, max=1.0
    )
    assumed_ttl: float = opt(
        600.0, "Seconds a claimed-but-unreported consumption is kept on a host.", min=1.0
    )
    db_pool_size: int = opt(4, "Connections per database (asyncpg or asyncmy).", min=1)
    db_query_timeout: float = opt(30.0, "Seconds before a host-state query is abandoned.", min=1.0)
    db_reconnect_max: float = opt(
        0.5,
        "Largest delay in seconds between cheap probes (SELECT 1) of a database that is down; "
        "the first comes after 0.1 s, and a database that answers is read at once.",
        min=0.1,
    )
    broker_reconnect_delay: float = opt(
        0.1,
        "First RabbitMQ reconnect delay in seconds, doubling per failed attempt (with jitter); "
        "replaces the slow oslo schedule so our queues are back right after the broker.",
        min=0.01,
    )
    broker_reconnect_delay_max: float = opt(
        0.5, "Largest RabbitMQ reconnect delay in seconds.", min=0.01
    )
    max_concurrent_requests: int = opt(
        32,
        "select_destinations calls handled at once; the held ones wait in the process.",
        min=1,
    )
    max_held_requests: int = opt(
        1000,
        "Calls taken off RabbitMQ and held unacked in the process (the basic.qos prefetch when "
        "rabbit_qos_prefetch_count is 0; nova's consumer takes them all). With nova's "
        "transient queues a broker restart loses what RabbitMQ still queues, not what the "
        "process holds; a stopping process hands back what it has not started.",
        min=1,
    )
    max_held_bytes: int = opt(
        256 * 1024 * 1024,
        "Bytes of the requests held in the process (max_held_requests bounds their count). "
        "A request that does not fit is handed back to RabbitMQ unread, and consuming pauses "
        "until half of it is free, then goes on with a prefetch it can hold; one request alone "
        "is always taken, whatever its size (up to max_message_bytes).",
        min=1024,
    )
    claim_concurrency: int = opt(
        64,
        "Placement claims of one multi-create in flight at once (they share POSTs, see "
        "claim_batch_size).",
        min=1,
        mutable=True,
    )
    claim_batch_size: int = opt(
        32,
        "New claims that wait for a write slot leave together, up to this many in one "
        "POST /allocations that Placement judges as it would each PUT; 1 sends every claim "
        "as its own PUT, as nova does.",
        min=1,
    )
    claim_writes_in_flight: int = opt(
        4,
        "Claim writes (a lone PUT or a shared POST /allocations) this process keeps in "
        "flight to Placement at once; claims arriving meanwhile wait and leave together.",
        min=1,
    )
    drain_timeout: float = opt(30.0, "Seconds SIGTERM waits for in-flight calls.", min=0.0)
    reply_cache_size: int = opt(
        10000, "Answered _unique_ids remembered to recognise redeliveries.", min=1
    )
    reply_cache_ttl: float = opt(3600.0, "Seconds an answered call's reply is kept.", min=1.0)
    max_message_bytes: int = opt(
        16 * 1024 * 1024, "Larger messages are rejected as malformed.", min=1024
    )
    max_instances_per_request: int = opt(
        10000,
        "A select_destinations asking for more instances is refused before any work.",
        min=1,
    )
    max_pending_replies: int = opt(
        1000,
        "Undelivered replies (reply queue missing) retried in the background at once; "
        "more are dropped.",
        min=0,
    )
    log_level: str = opt(
        "INFO",
        "Log level unless [DEFAULT] debug is set.",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        mutable=True,
    )
    health_file: str | None = opt(
        None, "Write a JSON health snapshot here every refresh (None = off)."
    )
    admin_listen: str | None = opt(
        None,
        "HOST:PORT of the admin HTTP endpoint (/metrics, /healthz, /readyz, /v1/status); "
        "unset = off. Prefer loopback, e.g. 127.0.0.1:9105. Any other address, and ':9105' "
        "(every address), needs admin_token_file or the daemon refuses to start.",
    )
    admin_token_file: str | None = opt(
        None,
        "File holding a bearer token; when set every admin endpoint but /healthz needs "
        "'Authorization: Bearer <token>'. Without it the endpoint is open to local users "
        "(a warning is logged).",
    )
    admin_cert_file: str | None = opt(
        None,
        "PEM certificate (chain) for HTTPS on the admin endpoint, with admin_key_file "
        "(as oslo's [ssl] cert_file); unset = plain HTTP.",
    )
    admin_key_file: str | None = opt(
        None, "PEM private key of admin_cert_file (as oslo's [ssl] key_file)."
    )
    admin_max_dry_runs: int = opt(
        1,
        "Explain and capacity runs at once; one more waits admin_dry_run_queue_timeout seconds "
        "for a slot, then gets 429.",
        min=1,
    )
    admin_dry_run_queue_timeout: float = opt(
        0.0,
        "Seconds an explain or capacity request waits for a slot before 429 (0 = answer 429 "
        "at once while the slots are taken).",
        min=0.0,
        mutable=True,
    )
    admin_dry_run_timeout: float = opt(
        10.0,
        "Seconds an explain or capacity run may take; then capacity answers what it counted "
        "so far (marked bounded) and explain answers 503.",
        min=0.1,
        mutable=True,
    )
    capacity_max_instances: int = opt(
        100000,
        "Instances a capacity run places at most; a larger answer is 'at least' this many.",
        min=1,
        mutable=True,
    )
    ready_max_state_age: float = opt(
        60.0,
        "/readyz fails when the API or a cell database was last read longer ago (seconds).",
        min=1.0,
        mutable=True,
    )
    ready_placement_timeout: float = opt(
        2.0, "Seconds /readyz waits for Placement's GET / before calling it unreachable.", min=0.1
    )
    placement_mirror: bool = opt(
        True, "Answer allocation candidates from a mirror of [placement_database] when set."
    )
    placement_mirror_interval: float = opt(
        0.5,
        "Seconds between mirror refreshes (provider generations and usage; changed providers "
        "are reloaded).",
        min=0.05,
    )
    placement_mirror_max_age: float = opt(
        30.0,
        "While the Placement database is unreachable the mirror keeps answering until its "
        "last good refresh is this many seconds old; then GET /allocation_candidates.",
        min=0.0,
    )
    overcommit_guard: bool = opt(
        True,
        "After each new claim, read the usage of its providers and back the claim out when a "
        "concurrent claim elsewhere (another scheduler) pushed one over capacity; the "
        "instance is then decided again. Placement alone lets such races overcommit.",
    )
    state_dir: str | None = opt(
        None,
        "Directory for state that must survive a restart: the journal of Placement "
        "rollbacks still to retry. Unset: $STATE_DIRECTORY (systemd's StateDirectory=), "
        "else they are kept in memory only and lost on a restart.",
    )
    placement_noauth_token: str = opt(
        "admin",
        "x-auth-token sent to Placement when [placement] auth_type is none/noauth "
        "(Placement's noauth2 treats 'admin' as an admin user).",
        secret=True,
    )
    fresh_services_wait: float = opt(
        0.25,
        "Seconds a request waits for its read of each cell's services table (nova reads it "
        "on every request); a cell slower than this is answered from the cached state. "
        "0 = off: services are as fresh as the last refresh.",
        min=0.0,
    )
    fresh_services_spacing: float = opt(
        0.025,
        "While requests overlap, seconds between the starts of two per-request services "
        "reads of one cell (at most half of fresh_services_wait). A request arriving sooner "
        "after a read started waits for the next one, shared by every request of that time: "
        "one read serves several, each still started after the request arrived. A lone "
        "caller is never held back. 0 = a read starts as soon as the previous one ends.",
        min=0.0,
    )


# Section name in the INI file -> attribute of Config.
SECTIONS: dict[str, str] = {
    "DEFAULT": "default",
    "database": "database",
    "api_database": "api_database",
    "placement": "placement",
    "placement_database": "placement_database",
    "scheduler": "scheduler",
    "filter_scheduler": "filter_scheduler",
    "metrics": "metrics",
    "compute": "compute",
    "workarounds": "workarounds",
    "oslo_messaging_rabbit": "oslo_messaging_rabbit",
    "notifications": "notifications",
    "oslo_messaging_notifications": "oslo_messaging_notifications",
    "asyncsched": "asyncsched",
}


@dataclass(frozen=True, slots=True)
class Config:
    """The whole effective configuration, validated once at start (or on SIGHUP)."""

    default: DefaultOptions = field(default_factory=DefaultOptions)
    database: DatabaseOptions = field(default_factory=DatabaseOptions)
    api_database: ApiDatabaseOptions = field(default_factory=ApiDatabaseOptions)
    placement: PlacementOptions = field(default_factory=PlacementOptions)
    placement_database: PlacementDatabaseOptions = field(default_factory=PlacementDatabaseOptions)
    scheduler: SchedulerOptions = field(default_factory=SchedulerOptions)
    filter_scheduler: FilterSchedulerOptions = field(default_factory=FilterSchedulerOptions)
    metrics: MetricsOptions = field(default_factory=MetricsOptions)
    compute: ComputeOptions = field(default_factory=ComputeOptions)
    workarounds: WorkaroundsOptions = field(default_factory=WorkaroundsOptions)
    oslo_messaging_rabbit: OsloMessagingRabbitOptions = field(
        default_factory=OsloMessagingRabbitOptions
    )
    notifications: NotificationsOptions = field(default_factory=NotificationsOptions)
    oslo_messaging_notifications: OsloMessagingNotificationsOptions = field(
        default_factory=OsloMessagingNotificationsOptions
    )
    asyncsched: AsyncschedOptions = field(default_factory=AsyncschedOptions)
