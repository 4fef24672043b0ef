"""Configuration: nova.conf option schema, loader, sample and effective-config rendering."""

from asyncsched.conf.loader import ConfigSources, LoadedConfig, load, load_config, load_string
from asyncsched.conf.options import Config

__all__ = ["Config", "ConfigSources", "LoadedConfig", "load", "load_config", "load_string"]
