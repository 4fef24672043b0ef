"""asyncsched: an asyncio drop-in replacement for OpenStack nova-scheduler."""

__version__ = "0.1.0"
