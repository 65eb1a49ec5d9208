"""Every output, for people and for machines: the screens, Markdown, HTML, GitHub annotations, JUnit, the JSON documents, the output switch, and the one-file bundle."""
