"""Hit Enter's web side: the Django project and app in one package."""
