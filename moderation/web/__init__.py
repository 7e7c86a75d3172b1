"""What the HTTP entry points share: the one error body and the rate limits."""
