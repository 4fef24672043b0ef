"""Host filters, one per module, nova's class names (see ``base.BaseHostFilter``)."""
