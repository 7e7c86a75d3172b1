"""Tools beside the product: the race lab (`race_lab`) and the provider simulator (`run_provider_simulator`)."""
