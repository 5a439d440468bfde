"""Workshop mode: the host's pins and limits, presence of visitors, following the host's broadcast, the room's stats."""
