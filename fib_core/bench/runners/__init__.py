"""Runner implementations with the organizers' shapes (:mod:`.mp_runner`)."""
