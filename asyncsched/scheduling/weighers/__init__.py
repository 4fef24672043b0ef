"""Host weighers, one per module, nova's class names (see ``base.BaseHostWeigher``)."""
