"""Customer data on request and by age: export, erasure and retention; may import db, knowledge and tickets."""
