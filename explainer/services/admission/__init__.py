"""Who gets in: generation slots per process and per address, socket rates, connections and frame caps."""
