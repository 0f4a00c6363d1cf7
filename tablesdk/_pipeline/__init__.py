"""One exchange and the retry loop around it: the Sender seam and its requests sender, retry policies, per-call options, the transport."""
