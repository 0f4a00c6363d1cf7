"""The unit of work: tracking, merge rules, save plans and outcomes, the context, the table object and the seeds' actions."""
