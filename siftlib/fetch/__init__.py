"""Page reading: the guard, the fetcher, the conversion of a page to markdown and its filters."""
